package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"

	clocktesting "k8s.io/utils/clock/testing"
)

// What the server offers this node's prober (it confirms another node's
// delegation) is published with source offer, never pd, with the valid
// lifetime the server stated (which bounds the delegation's drain once it is
// replaced), until that lifetime ends or the prober withdraws it.
func TestAnOfferIsPublishedApartFromDelegations(t *testing.T) {
	a, rec, clk, _ := startWith(t, Config{}, "")
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true, Delegated: true}})
	a.RA("eth0", router, clk.Now(), []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: time.Hour, Autonomous: true}})
	const plain = "v1;eth0=2001:db8:a::/64 p ra"
	waitPublished(t, rec, clk, plain)

	offered := netip.MustParsePrefix("2001:db8:a00::/56")
	a.Offered("eth0", offered, time.Minute, false, clk.Now())
	const withOffer = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p60 offer"
	waitPublished(t, rec, clk, withOffer)
	a.Offered("eth1", offered, time.Minute, false, clk.Now()) // a link not watched: nothing
	clk.Step(time.Minute)                                     // the offer lapses unrepeated
	waitPublished(t, rec, clk, plain)

	a.Offered("eth0", offered, time.Hour, false, clk.Now())
	const withHour = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p3600 offer"
	waitPublished(t, rec, clk, withHour)
	a.Offered("eth0", offered, 0xffffffff*time.Second, false, clk.Now()) // infinite: stated as such
	const withInfinite = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p4294967295 offer"
	waitPublished(t, rec, clk, withInfinite)
	a.Offered("eth0", offered, 0, true, clk.Now()) // the prober stopped
	waitPublished(t, rec, clk, plain)
	if got := rec.valuesFrom(plain); !slices.Equal(got, []string{plain, withOffer, plain, withHour, withInfinite, plain}) {
		t.Errorf("published %q", got)
	}
}

// A server that states what is left of the binding in each Advertise (its
// lifetime counting down) changes nothing published: the offer carries the
// longest lifetime stated since it was first offered, so the confirmer's
// digest is not rewritten at every probe.
func TestAnOfferCountingDownIsPublishedOnce(t *testing.T) {
	a, rec, clk := offering(t)
	const plain = "v1;eth0=2001:db8:a::/64 p ra"
	offered := netip.MustParsePrefix("2001:db8:a00::/56")
	const withHour = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p3600 offer"
	for left := time.Hour; left > 40*time.Minute; left -= 10 * time.Minute {
		a.Offered("eth0", offered, left, false, clk.Now())
		sync_(a)
		waitPublished(t, rec, clk, withHour)
		clk.Step(10 * time.Minute)
	}
	// Once it lapses unrepeated, the next offer starts again.
	clk.Step(time.Hour)
	waitPublished(t, rec, clk, plain)
	a.Offered("eth0", offered, 30*time.Minute, false, clk.Now())
	const withHalf = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p1800 offer"
	waitPublished(t, rec, clk, withHalf)
	if got := rec.valuesFrom(plain); !slices.Equal(got, []string{plain, withHour, plain, withHalf}) {
		t.Errorf("published %q", got)
	}
}

// offering starts an agent watching eth0 for delegations, with a router's
// day-long prefix published (plain, below), to be offered delegations.
func offering(t *testing.T) (*Agent, *recorder, *clocktesting.FakeClock) {
	t.Helper()
	a, rec, clk, _ := startWith(t, Config{}, "")
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true, Delegated: true}})
	a.RA("eth0", router, clk.Now(), []observe.RAPrefix{{Prefix: pA, Valid: 24 * time.Hour, Preferred: 24 * time.Hour, Autonomous: true}})
	waitPublished(t, rec, clk, "v1;eth0=2001:db8:a::/64 p ra")
	return a, rec, clk
}

// A count-down past half - nobody renewed the binding since the longest was
// stated, so it is on its way to lapse - is published: the writer counts the
// offer's lifetime from when it learns the server moved on, and the longest
// kept a lapsed delegation a whole lifetime past the end the server stated
// (decide's TestACountingDownServersLapsedDelegationDrainsNoLongerThanItsEnd;
// here before: p3600 still after 35 minutes). Each halving is one write, and
// only while nobody renews.
func TestAnOfferCountingDownPastHalfIsPublished(t *testing.T) {
	a, rec, clk := offering(t)
	const plain = "v1;eth0=2001:db8:a::/64 p ra"
	offered := netip.MustParsePrefix("2001:db8:a00::/56")
	a.Offered("eth0", offered, time.Hour, false, clk.Now())
	const withHour = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p3600 offer"
	waitPublished(t, rec, clk, withHour)
	clk.Step(35 * time.Minute) // the same end, 25 minutes left: past half
	a.Offered("eth0", offered, 25*time.Minute, false, clk.Now())
	const withLeft = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p1500 offer"
	waitPublished(t, rec, clk, withLeft)
	clk.Step(5 * time.Minute) // 20 minutes left: not past half of 25
	a.Offered("eth0", offered, 20*time.Minute, false, clk.Now())
	sync_(a)
	if got := rec.values(); !slices.Equal(got, []string{plain, withHour, withLeft}) {
		t.Errorf("published %q", got)
	}
}

// A server that shortens the valid lifetime it states - as an operator does
// ahead of a planned renumbering (RFC 4192 2.1, 3.2: lower the lifetimes,
// then renumber) - is published at once: the lifetime's end moves earlier,
// which a count-down (the same end, stated afresh) never does. Found by a red
// team: the longest since the offer began kept p3600, so a liar client kept
// the replaced delegation an hour after the renumbering, not a minute.
func TestAServerShorteningItsLifetimeIsPublished(t *testing.T) {
	a, rec, clk, _ := startWith(t, Config{}, "")
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true, Delegated: true}})
	a.RA("eth0", router, clk.Now(), []observe.RAPrefix{{Prefix: pA, Valid: 24 * time.Hour, Preferred: 24 * time.Hour, Autonomous: true}})
	waitPublished(t, rec, clk, "v1;eth0=2001:db8:a::/64 p ra")

	offered := netip.MustParsePrefix("2001:db8:a00::/56")
	a.Offered("eth0", offered, time.Hour, false, clk.Now())
	waitPublishedWith(t, rec, clk, "the hour", func(v string) bool { return strings.Contains(v, offered.String()+" p3600 offer") })
	clk.Step(30 * time.Minute) // the offer's T1: the confirmer probes again
	for range 10 {
		// The operator lowered the server's lifetimes: every answer
		// from now on states a minute; the confirmer probes at its T1.
		a.Offered("eth0", offered, time.Minute, false, clk.Now())
		sync_(a)
		clk.Step(30 * time.Second)
	}
	waitPublishedWith(t, rec, clk, "the minute the server states now (p60) after ten answers stating it",
		func(v string) bool { return strings.Contains(v, offered.String()+" p60 offer") })
}

// A router believed on the PD link (trustedRouters unset: every router is)
// advertising 40 /64s fills the digest; the confirmer's offer still gets its
// slot (an RA prefix is evicted for it, and said so), where it was left out
// without a word and the delegation it would confirm waited for ever. Found
// by a red team.
func TestAFullDigestStillCarriesTheConfirmersOffer(t *testing.T) {
	a, rec, clk, _ := startWith(t, Config{}, "")
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true, Delegated: true}})
	var ps []observe.RAPrefix
	for i := range 40 {
		ps = append(ps, observe.RAPrefix{Prefix: netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/64", 0x100+i)), Valid: time.Hour, Preferred: time.Hour, Autonomous: true})
	}
	a.RA("eth0", router, clk.Now(), ps)
	sync_(a)
	offered := netip.MustParsePrefix("2001:db8:a00::/56")
	a.Offered("eth0", offered, time.Hour, false, clk.Now())
	sync_(a)
	waitPublishedWith(t, rec, clk, "the offer", func(v string) bool { return strings.Contains(v, offered.String()+" p3600 offer") })
}

// An offer is no change of the link: the journal, which compares each
// snapshot with the last, logs none while it stands (markOffers added it to
// the snapshot the journal kept, so every later evaluation logged it gone:
// dozens of "gone (offer)" lines a minute on every confirmer).
func TestAnOfferStandingLogsNothing(t *testing.T) {
	a, rec, clk, _ := startWith(t, Config{}, "")
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true, Delegated: true}})
	a.RA("eth0", router, clk.Now(), []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: time.Hour, Autonomous: true}})
	waitPublished(t, rec, clk, "v1;eth0=2001:db8:a::/64 p ra")
	gone := metricPrefixEvents.With("gone").Value()
	offered := netip.MustParsePrefix("2001:db8:a00::/56")
	a.Offered("eth0", offered, time.Hour, false, clk.Now())
	waitPublished(t, rec, clk, "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p3600 offer")
	for range 5 { // evaluations while it stands
		a.RA("eth0", router, clk.Now(), []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: time.Hour, Autonomous: true}})
		sync_(a)
	}
	if n := metricPrefixEvents.With("gone").Value() - gone; n != 0 {
		t.Errorf("the journal logged %d prefixes gone while the offer stood, want none", n)
	}
}
