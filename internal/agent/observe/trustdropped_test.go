package observe

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// A router dropped from trustedRouters while the agent runs leaves nothing
// behind (SetPolicies): no believed word, no proposal, no seniority. The
// first test failed on the code it was written against (a red team's
// reading of the memory), the second on that red team's scratch fix.

// trustedRouters changed while the agent runs - a rogue router found and
// dropped from the list - must take the rogue's believed word out of the
// RA table. When SetPolicies filtered only what was heard after it, the
// word stayed: Snapshot reported every entry of the table (source ra), and
// Memory wrote it to the node for the next run, so routerB's C (believed
// while routerB was trusted) stayed preferred until the lifetimes routerB
// stated (infinite here: for ever), across any number of restarts.
func TestARouterDroppedFromTrustedRoutersIsNoLongerBelieved(t *testing.T) {
	both := map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerA, routerB}}}
	s := agreed(t)
	s.SetPolicies(both)
	heard := t0.Add(10 * time.Second)
	s.RA("eth0", routerB, heard, []RAPrefix{{pC, Infinite, Infinite, true}}) // the first word since the last solicitation: its answer
	at := heard.Add(time.Minute)
	if n := mustSnapshot(s, at); !preferredIn(n, pC.String()) {
		t.Fatalf("routerB's C, trusted: %s; want it preferred", encode(t, s, at))
	}
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerA}}})
	later := at.Add(time.Hour)
	if n := mustSnapshot(s, later); slices.ContainsFunc(n.Links[0].Prefixes, func(p digest.Prefix) bool { return p.Prefix == pC }) {
		t.Errorf("an hour after routerB left trustedRouters: %s, want nothing of routerB's C", encode(t, s, later))
	}
	for _, w := range s.Memory(later).Links[0].Words {
		if w.Router == routerB {
			t.Errorf("the memory keeps %s's word of %s, a router no longer trusted", w.Router, w.Prefix)
		}
	}
}

// A router dropped from trustedRouters while its word waits out its window
// is not believed once the window passes: settle believes a proposal with
// no look at the policy, so SetPolicies forgets the dropped router's
// proposals too, not only its believed words.
func TestAProposalOfARouterDroppedFromTrustedRoutersIsNotBelieved(t *testing.T) {
	s := agreed(t)
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerA, routerB}}})
	heard := t0.Add(10 * time.Second)
	s.RA("eth0", routerB, heard, []RAPrefix{{pC, Infinite, Infinite, true}}) // its answer, put to the window
	if !s.links["eth0"].proposed(pC) {
		t.Fatal("routerB's C is not waiting its window: the scenario is off")
	}
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerA}}})
	at := heard.Add(time.Minute)
	if n := mustSnapshot(s, at); slices.ContainsFunc(n.Links[0].Prefixes, func(p digest.Prefix) bool { return p.Prefix == pC }) {
		t.Errorf("a minute after routerB left trustedRouters, its word waiting then: %s, want nothing of C", encode(t, s, at))
	}
	if s.Senior("eth0", routerB) {
		t.Error("routerB, no longer trusted, is still the link's senior router")
	}
}

// A router named again in trustedRouters is heard afresh, as a new
// router's address, but not as one that has been silent: while it was
// dropped it went on speaking, unread - its answer to the last
// solicitation among its words. A spoofer's word from its address just
// after it is named again is no answer to that solicitation: it is put to
// the router by a new one, whose answer contradicts it. Found by
// FuzzTwoRouters (14a75d1d90c638ea): before, the spoofer's word was taken
// for the first word since the solicitation, its window passed with the
// router's answer already gone, and routerA was believed to offer X.
func TestARouterNamedAgainInTrustedRoutersIsAskedAfresh(t *testing.T) {
	s := agreed(t)
	trustAll := map[string]policy.Policy{"eth0": {GlobalOnly: true}}
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerB}}}) // routerA dropped
	asked := t0.Add(time.Minute)
	s.Solicited("eth0", asked)                                        // the listener solicits (a reopened socket)
	s.Heard("eth0", routerA, asked.Add(time.Millisecond), nil, false) // the router's answer: it offers nothing now, unread
	named := asked.Add(time.Second)
	s.SetPolicies(trustAll)
	spoof := named.Add(time.Millisecond)
	s.RA("eth0", routerA, spoof, offer(pX))
	if due, _ := s.Solicit(spoof.Add(time.Millisecond)); len(due) > 0 {
		s.Solicited("eth0", spoof.Add(time.Millisecond))
		s.Heard("eth0", routerA, spoof.Add(2*time.Millisecond), nil, false) // it answers at once
	}
	at := spoof.Add(initialWindow + time.Second)
	if got := encode(t, s, at); strings.Contains(got, pX.Addr().String()) {
		t.Errorf("the spoofer's X is believed of routerA: %s", got)
	}
}
