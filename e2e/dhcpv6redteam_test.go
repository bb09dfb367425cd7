package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestDHCPv6PDALiarClientOfTwoKeepsNoRenumberedDelegation (red team, issue
// 42, "one node"): two eligible nodes, the client's Node taken (its agent
// killed, the test writes its digest; the Node stays Ready). ISC dhcpd
// renumbers (valid 60 s); the confirmer is offered the new delegation and
// the disagreement is reported, but the liar keeps claiming the old one and
// never renews it. Nobody backs the confirmer's offer with two nodes, so the
// old delegation stays current - in the pool - however long after the
// 60 s dhcpd stated for it, though status.dhcpv6pd.validLifetime says 60.
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
	claim := "v1;eth0=" + p1.String() + " p pd"
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, digest.Annotation, claim)
	if _, err := w.API.Client.CoreV1().Nodes().Patch(ctx, liar, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
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
	// latest; give it two bounds and a minute more.
	time.Sleep(time.Until(renumbered.Add(first.Valid + 2*30*time.Second + time.Minute)))
	st := dpStatus(t, w, "home")
	b := blocks(t, w, "lb")
	t.Logf("%v after dhcpd renumbered: current %s, pool %v, dhcpv6pd %+v", time.Since(renumbered).Round(time.Second), st.CurrentPrefix, b, st.DHCPv6PD)
	if slices.Contains(b, p1.String()) {
		t.Errorf("%s still in the pool %v after dhcpd renumbered (it stated %v for it): the liar's claim alone keeps it (current %s)",
			p1, time.Since(renumbered).Round(time.Second), first.Valid, st.CurrentPrefix)
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
