package decide

import (
	"testing"
	"time"
)

// The RA red team's ballot consequence of the agents' restart hole
// (observe.TestADeprecatedPrefixStaysDeprecatedAcrossAnAgentRestart): an
// agent restarted after its router renumbered A to B by omitting A reports
// A preferred again from its SLAAC address (the kernel keeps it preferred,
// and a spoofer's replay of the router's old RA refreshes it). After a
// DaemonSet rollout every node does; the router's next renumbering, B to C,
// then ties with A, and B - deprecated everywhere - stays current for as
// long as A is reported preferred (with replays, for as long as they last).
func TestARenumberingIsNotHeldByAPrefixTheRouterOmitted(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onA, onA, onA), t0))
	st = status(For(parse(eth0()), st, reports(t, onB, onB, onB), t0.Add(time.Minute)))
	// Every agent restarted since (a rollout); the router renumbers to C.
	// What each restarted agent reports since the fix (observe's seedCap):
	// A as its last digest carried it, deprecated. Before it, "A p addr".
	restarted := "v1;eth0=2001:db8:a::/64 d592 addr,2001:db8:b::/64 d600 ra+addr,2001:db8:c::/64 p ra+addr"
	for _, after := range []time.Duration{time.Hour, 3 * time.Hour} {
		d := For(parse(eth0()), st, reports(t, restarted, restarted, restarted), t0.Add(after))
		if d.Current.String() != "2001:db8:c::/64" {
			t.Errorf("+%s after the renumbering to C: current %s (votes %v), want C: the router omitted A two renumberings ago", after, d.Current, d.Votes)
		}
	}
}

// The second case: a spoofer's replays of the router's RA from before A was
// omitted hold its current offer B doubted until B's stated preferred
// lifetime runs out, and keep A's SLAAC addresses preferred in the kernel
// (observe's TestASpooferCannotBringBackAPrefixTheRouterOmitted). Every
// agent restarted since A was omitted reports A preferred alone; the ballot
// adopts it. Agents that did not restart report nothing preferred, and B
// holds.
func TestASpooferCannotBringBackAPrefixTheRouterOmitted(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onA, onA, onA), t0))
	st = status(For(parse(eth0()), st, reports(t, onB, onB, onB), t0.Add(time.Minute)))
	// Since the fix (observe's seedCap) a restarted agent reports what one
	// that did not restart does: nothing preferred. Before it, "A p addr".
	restarted := "v1;eth0 conflict=2001:db8:a::/64 d592 addr,2001:db8:b::/64 d1800 ra+addr"
	d := For(parse(eth0()), st, reports(t, restarted, restarted, restarted), t0.Add(time.Hour))
	if d.Current.String() != "2001:db8:b::/64" {
		t.Errorf("current %s (votes %v), want B held: the router never offered A again", d.Current, d.Votes)
	}
}
