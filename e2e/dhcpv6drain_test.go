package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// TestDHCPv6PDALiarClientKeepsNoReplacedDelegation (issue 42, "one node"):
// the client's Node is taken (its agent replaced by whoever holds its
// token; the Node stays Ready, so it stays the client). ISC dhcpd renumbers
// the delegation; the liar reports the new one, which the confirmer is
// offered alike, and the old one deprecated with 2^32-1 s left. The old
// delegation drains no longer than the valid lifetime the confirmer heard
// dhcpd state for it (60 s), counted from the renumbering, and then leaves
// the pool while the liar still says 136 years (before: its deadline was the
// liar's word, 2162).
func TestDHCPv6PDALiarClientKeepsNoReplacedDelegation(t *testing.T) {
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 60 * time.Second, Preferred: 30 * time.Second}
	w, agents, _ := pdClientWorld(t, 3, first, "--node-not-ready-grace", "10s", "--dhcpv6-confirm-within", "30s")
	ctx := t.Context()
	p1, client, confirmer := delegationConfirmed(t, w)
	eventuallyWithin(t, time.Minute, "status.dhcpv6pd.validLifetime from the confirmer's offer", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.DHCPv6PD != nil && st.DHCPv6PD.ValidLifetime == int64(first.Valid/time.Second), fmt.Sprintf("%+v", st.DHCPv6PD)
	})
	t.Logf("%s: client %s, confirmer %s, validLifetime %v", p1, client, confirmer, first.Valid)

	liar := client
	if err := agents[liar].Kill(); err != nil {
		t.Fatal(err)
	}
	write := forger(t, w, liar) // its agent's token, as a stolen one would
	write("v1;eth0=" + p1.String() + " p pd")

	second := first
	second.Pool = netip.MustParsePrefix("2001:db8:b00::/52")
	if err := w.Net.Router.DelegatePrefixes(ctx, second); err != nil {
		t.Fatal(err)
	}
	var p2 netip.Prefix
	eventuallyWithin(t, 2*time.Minute, "the confirmer offered dhcpd's renumbering", func() (bool, string) {
		v, _ := annotation(t, w, confirmer)
		n, err := digest.Decode(v)
		if err != nil {
			return false, v
		}
		for _, l := range n.Links {
			for _, e := range l.Prefixes {
				if e.Sources == digest.SourceOffer && second.Pool.Contains(e.Prefix.Addr()) {
					p2 = e.Prefix
					return true, v
				}
			}
		}
		return false, v
	})
	// The liar reports the renumbering as the confirmer is offered it, and
	// keeps the old delegation deprecated for 136 years.
	write(fmt.Sprintf("v1;eth0=%s d%d pd,%s p pd", p1, uint32(digest.MaxLifetime), p2))
	var drain api.HistoryEntry
	eventuallyWithin(t, time.Minute, "the renumbering current, the old delegation draining", func() (bool, string) {
		st := dpStatus(t, w, "home")
		i := slices.IndexFunc(st.History, func(h api.HistoryEntry) bool { return h.Prefix == p1.String() })
		if st.CurrentPrefix != p2.String() || i < 0 {
			return false, fmt.Sprintf("%s %+v", st.CurrentPrefix, st.History)
		}
		drain = st.History[i]
		return true, ""
	})
	t.Logf("%s current; %s %s since %v until %v", p2, p1, drain.State, drain.DeprecatedAt, drain.ExpiresAt)
	if drain.DeprecatedAt == nil || drain.ExpiresAt == nil || drain.ExpiresAt.Sub(drain.DeprecatedAt.Time) > first.Valid {
		t.Fatalf("%s drains from %v until %v: past the %v dhcpd stated for it", p1, drain.DeprecatedAt, drain.ExpiresAt, first.Valid)
	}
	// It leaves the pool by then, while the liar still says 136 years.
	eventuallyWithin(t, first.Valid+30*time.Second, "the old delegation out of the pool", func() (bool, string) {
		b := blocks(t, w, "lb")
		return slices.Equal(b, []string{"192.0.2.0/24", p2.String()}), fmt.Sprint(b)
	})
	if v, _ := annotation(t, w, liar); v != fmt.Sprintf("v1;eth0=%s d%d pd,%s p pd", p1, uint32(digest.MaxLifetime), p2) {
		t.Errorf("the liar's digest is %q, want it still claiming 136 years", v)
	}
	t.Logf("%s out of the pool %v after the renumbering", p1, time.Since(drain.DeprecatedAt.Time).Round(time.Second))
}
