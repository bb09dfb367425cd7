package agent

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
)

// A DHCPv6 client hearing answers under its server's DUID contradict each
// other marks its link in conflict in the digest, as RAs from one router
// address that disagree do, until the hold passes without another; the
// delegation stays as the client holds it.
func TestADHCPv6ConflictMarksTheLinkUntilTheHoldPasses(t *testing.T) {
	a, rec, clk, _ := startWith(t, Config{}, "")
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true, Delegated: true}})
	a.RA("eth0", router, clk.Now(), []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: time.Hour, Autonomous: true}})
	a.Delegated(netip.MustParsePrefix("2001:db8:a00::/56"), time.Hour, false, clk.Now())
	const agreed = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p pd"
	waitPublished(t, rec, clk, agreed)

	a.DelegationConflict("eth0", clk.Now())
	waitPublished(t, rec, clk, "v1;eth0 conflict=2001:db8:a::/64 p ra,2001:db8:a00::/56 p pd")
	if got := metricPDConflict.With("eth0").Value(); got != 1 {
		t.Errorf("renumber_agent_dhcpv6_conflict = %v, want 1", got)
	}
	clk.Step(observe.DefaultConflictHold / 2)
	a.DelegationConflict("eth0", clk.Now()) // another: the hold starts again
	sync_(a)
	clk.Step(observe.DefaultConflictHold / 2)
	sync_(a)
	if got := rec.values(); got[len(got)-1] == agreed {
		t.Fatal("the mark lapsed a hold after the first contradiction, not the last")
	}
	clk.Step(observe.DefaultConflictHold / 2)
	waitPublished(t, rec, clk, agreed)
	if got := metricPDConflict.With("eth0").Value(); got != 0 {
		t.Errorf("renumber_agent_dhcpv6_conflict = %v, want 0", got)
	}
	if got := rec.values(); !slices.Equal(got, []string{agreed, "v1;eth0 conflict=2001:db8:a::/64 p ra,2001:db8:a00::/56 p pd", agreed}) {
		t.Errorf("published %q", got)
	}
}

// A host speaking to the DHCPv6 server as the client (dhcp6.Watch) is
// counted and marks the link in conflict, as contradicting answers do.
func TestADHCPv6ImpersonationIsCountedAndMarksTheLink(t *testing.T) {
	a, rec, clk := holdingOnEth1(t)
	before := metricPDImpersonations.With("eth1").Value()
	a.DelegationImpersonated("eth1", clk.Now())
	waitPublished(t, rec, clk, "v1;eth1 conflict=2001:db8:a00::/56 p pd")
	if got := metricPDImpersonations.With("eth1").Value() - before; got != 1 {
		t.Errorf("renumber_agent_dhcpv6_impersonations_total grew by %v, want 1", got)
	}
}

// The server dropping a binding the client holds (a Release in its name
// sent where the node cannot hear it) is counted and marks the link like
// an impersonation heard; the delegation reported stays what the client
// says (the client follows the server; the report holds nothing back).
func TestADHCPv6BindingDroppedIsCountedAndMarksTheLink(t *testing.T) {
	a, rec, clk := holdingOnEth1(t)
	before := metricPDDropped.With("eth1").Value()
	a.DelegationDropped("eth1", clk.Now())
	waitPublished(t, rec, clk, "v1;eth1 conflict=2001:db8:a00::/56 p pd")
	a.Delegated(netip.MustParsePrefix("2001:db8:a00::/56"), 0, true, clk.Now())
	a.Delegated(netip.MustParsePrefix("2001:db8:b00::/56"), time.Hour, false, clk.Now())
	waitPublished(t, rec, clk, "v1;eth1 conflict=2001:db8:b00::/56 p pd")
	if got := metricPDDropped.With("eth1").Value() - before; got != 1 {
		t.Errorf("renumber_agent_dhcpv6_bindings_dropped_total grew by %v, want 1", got)
	}
}

// Packets the client's node's listener dropped unread (a flood) are
// counted, and mark nothing: they say a message may have gone unheard, not
// that one did.
func TestDHCPv6MessagesMissedAreCountedOnly(t *testing.T) {
	a, rec, _ := holdingOnEth1(t)
	before := metricPDMissed.With("eth1").Value()
	a.ClientMessagesMissed("eth1", 1908)
	sync_(a)
	if got := metricPDMissed.With("eth1").Value() - before; got != 1908 {
		t.Errorf("renumber_agent_dhcpv6_listener_dropped_total grew by %v, want 1908", got)
	}
	if got := rec.values(); got[len(got)-1] != "v1;eth1=2001:db8:a00::/56 p pd" {
		t.Errorf("published %q, want the link unmarked", got[len(got)-1])
	}
}

// holdingOnEth1 is an agent whose DHCPv6 client on eth1 holds
// 2001:db8:a00::/56, published.
func holdingOnEth1(t *testing.T) (*Agent, *recorder, *clocktesting.FakeClock) {
	t.Helper()
	a, rec, clk, _ := startWith(t, Config{}, "")
	a.SetLinks(map[string]policy.Policy{"eth1": {GlobalOnly: true, Delegated: true}})
	a.Delegated(netip.MustParsePrefix("2001:db8:a00::/56"), time.Hour, false, clk.Now())
	waitPublished(t, rec, clk, "v1;eth1=2001:db8:a00::/56 p pd")
	return a, rec, clk
}
