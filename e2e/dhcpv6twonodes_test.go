package e2e

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestDHCPv6PDALiarClientOfTwoKeepsNoRenumberedDelegation (a red team,
// issue 42, "one node"): two eligible nodes, the client's Node taken (its
// agent killed, the test writes its digest; the Node stays Ready). ISC
// dhcpd renumbers (valid 60 s); the confirmer is offered the new delegation
// and the liar keeps claiming the old one and never renews it. With two
// nodes nothing tells this liar client from an honest one renewing p1
// against a lying confirmer, so p1 stays (docs/security.md "One node"), but
// the stall is reported once it outlasts what dhcpd stated: Degraded True,
// reason DelegationStalled, naming nodeNames, a Warning event,
// DelegationConfirmed promising no other node - and the status, once the
// stall is reported, is not written again. Before, the stall was quiet
// (Degraded False Healthy, the condition promising a node that does not
// exist) while p1 stayed pooled past dhcpd's 60 s.
func TestDHCPv6PDALiarClientOfTwoKeepsNoRenumberedDelegation(t *testing.T) {
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 60 * time.Second, Preferred: 30 * time.Second}
	w, agents, _ := pdClientWorld(t, 2, first, "--node-not-ready-grace", "10s", "--dhcpv6-confirm-within", "30s")
	ctx := t.Context()
	p1, client, confirmer := delegationConfirmed(t, w)
	eventuallyWithin(t, time.Minute, "status.dhcpv6pd.validLifetime from the confirmer's offer", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.DHCPv6PD != nil && st.DHCPv6PD.ValidLifetime == int64(first.Valid/time.Second), fmt.Sprintf("%+v", st.DHCPv6PD)
	})
	liar := client
	if err := agents[liar].Kill(); err != nil {
		t.Fatal(err)
	}
	forger(t, w, liar)("v1;eth0=" + p1.String() + " p pd") // its agent's token, as a stolen one would
	second := first
	second.Pool = netip.MustParsePrefix("2001:db8:b00::/52")
	if err := w.Net.Router.DelegatePrefixes(ctx, second); err != nil {
		t.Fatal(err)
	}
	renumbered := time.Now()
	eventuallyWithin(t, 2*time.Minute, "the confirmer offered dhcpd's renumbering", func() (bool, string) {
		v, _ := annotation(t, w, confirmer)
		return slices.ContainsFunc(offers(v), func(p netip.Prefix) bool { return second.Pool.Contains(p.Addr()) }), v
	})
	eventuallyWithin(t, time.Minute, "the disagreement reported", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.DHCPv6PD != nil && st.DHCPv6PD.Since != "", fmt.Sprintf("%+v", st.DHCPv6PD)
	})
	// dhcpd's last word on p1 ended 60 s after the renumbering at the
	// latest; since + validLifetime (60 s) passes within a bound of it.
	eventuallyWithin(t, 3*time.Minute, "the stall reported Degraded", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return condition(st, "Degraded") == "True DelegationStalled", condition(st, "Degraded")
	})
	msg := eventMessage(t, w, "DelegationStalled", "home")
	if !strings.Contains(msg, "nodeNames") {
		t.Errorf("the Warning does not say what the user can do: %q", msg)
	}
	st := dpStatus(t, w, "home")
	for _, c := range st.Conditions {
		if c.Type == "DelegationConfirmed" && strings.Contains(c.Message, "another node confirms") {
			t.Errorf("DelegationConfirmed promises another node with two: %q", c.Message)
		}
	}
	b := blocks(t, w, "lb")
	t.Logf("%v after dhcpd renumbered: current %s, pool %v, dhcpv6pd %+v", time.Since(renumbered).Round(time.Second), st.CurrentPrefix, b, st.DHCPv6PD)
	if !slices.Contains(b, p1.String()) || st.CurrentPrefix != p1.String() {
		t.Errorf("one node's word moved the prefix: current %s, pool %v (want %s kept, reported)", st.CurrentPrefix, b, p1)
	}
	// Reported once: two bounds later (the writer passes at each) the
	// status is as it was.
	time.Sleep(2*30*time.Second + 5*time.Second)
	if again := dpStatus(t, w, "home"); !reflect.DeepEqual(again.Conditions, st.Conditions) || !reflect.DeepEqual(again.DHCPv6PD, st.DHCPv6PD) {
		t.Errorf("the status was written again at rest:\n%+v\n%+v", st, again)
	}
}

// offers lists the prefixes a digest reports with source offer.
func offers(v string) []netip.Prefix {
	n, err := digest.Decode(v)
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, l := range n.Links {
		for _, e := range l.Prefixes {
			if e.Sources == digest.SourceOffer {
				out = append(out, e.Prefix)
			}
		}
	}
	return out
}
