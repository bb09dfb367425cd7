package agent

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// A server that states what is left of the binding (its lifetime counting
// down) and a client that renews at T1, half the valid lifetime (RFC 8415
// 21.21's default with preferred = valid): the binding is never past half
// but at the instant of each Renew. The confirmer probes at its offer's T1,
// a collect window later each cycle than the client renews, so its phase
// drifts through the client's; the probe that lands in the second before the
// client's Renew reaches the server hears a second less than half (the
// server rounds down; an agreeing Advertise from a forger under the
// server's DUID takes up to agreeWithin more off, and merge keeps the
// earlier end). Nothing changed - the binding was renewed on time - yet the
// digest is rewritten, and the writer keeps the shortest lifetime a
// confirmer heard while the prefix is current (status.dhcpv6pd.validLifetime):
// the delegation's drain bound halves for as long as it stays current.
// Red team: now p1799 (the count-down-past-half rule, b3c26f2), then p1802 at
// the prober's next probe - it waits min(T1, the offer's end) and the agent
// takes the renewed binding, heard at the old end, for a new offer; before
// b3c26f2, p1802 alone. Either way 1799-1802 s where the server stated
// 3600 s at every renewal.
func TestAnOfferRenewedAtHalfIsNotPublishedShorter(t *testing.T) {
	a, rec, clk := offering(t)
	offered := netip.MustParsePrefix("2001:db8:a00::/56")
	const withHour = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p3600 offer"
	a.Offered("eth0", offered, time.Hour, false, clk.Now()) // renewed at t0: ends t0+1h
	waitPublished(t, rec, clk, withHour)
	// The offer's T1 and the collect window on: the client's Renew, due
	// now, reaches the server a second after this probe (ends t0+1h still).
	clk.Step(30*time.Minute + time.Second)
	a.Offered("eth0", offered, 30*time.Minute-time.Second, false, clk.Now())
	sync_(a)
	// The client renewed a second later (ends t0+1h30m+2s). The prober waits
	// for the offer's T1 or its end, whichever comes first (Prober.Run):
	// the end, t0+1h.
	clk.Step(30*time.Minute - time.Second)
	a.Offered("eth0", offered, 30*time.Minute+2*time.Second, false, clk.Now())
	sync_(a)
	clk.Step(0)
	sync_(a)
	if got := rec.valuesFrom(withHour); !slices.Equal(got, []string{withHour}) {
		t.Errorf("a binding renewed at every T1 published %q, want %q alone (the server stated 3600 s at every renewal)", got, withHour)
	}
}
