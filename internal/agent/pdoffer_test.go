package agent

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
)

// What the server offers this node's prober (it confirms another node's
// delegation) is published with source offer, never pd, until the offer's
// valid lifetime ends or the prober withdraws it.
func TestAnOfferIsPublishedApartFromDelegations(t *testing.T) {
	a, rec, clk, _ := startWith(t, Config{}, "")
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true, Delegated: true}})
	a.RA("eth0", router, clk.Now(), []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: time.Hour, Autonomous: true}})
	const plain = "v1;eth0=2001:db8:a::/64 p ra"
	waitPublished(t, rec, clk, plain)

	offered := netip.MustParsePrefix("2001:db8:a00::/56")
	a.Offered("eth0", offered, time.Minute, false, clk.Now())
	const withOffer = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p offer"
	waitPublished(t, rec, clk, withOffer)
	a.Offered("eth1", offered, time.Minute, false, clk.Now()) // a link not watched: nothing
	clk.Step(time.Minute)                                     // the offer lapses unrepeated
	waitPublished(t, rec, clk, plain)

	a.Offered("eth0", offered, time.Hour, false, clk.Now())
	waitPublished(t, rec, clk, withOffer)
	a.Offered("eth0", offered, 0, true, clk.Now()) // the prober stopped
	waitPublished(t, rec, clk, plain)
	if got := rec.values(); !slices.Equal(got, []string{plain, withOffer, plain, withOffer, plain}) {
		t.Errorf("published %q", got)
	}
}
