package agent

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
)

// Red team (issue 42): a server that shortens the valid lifetime it states
// - as an operator does ahead of a planned renumbering (RFC 4192 2.1, 3.2:
// lower the lifetimes, then renumber) - is published with the longest it
// stated since the offer began, for as long as the confirmer probes again
// before the last statement's end (every T1). The server states 60 s from
// here on; the digest keeps p3600, so status.dhcpv6pd.validLifetime never
// falls below an hour and a liar client keeps the replaced delegation an
// hour after the renumbering, not a minute. A count-down (the same end,
// stated afresh) and a shortening (the end moves earlier) are told apart by
// where the lifetime ends; the max since the offer began treats both alike.
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
	// Fails with the digest still saying p3600: the server's shorter
	// statement never reaches the writer.
	waitPublishedWith(t, rec, clk, "the minute the server states now (p60) after ten answers stating it",
		func(v string) bool { return strings.Contains(v, offered.String()+" p60 offer") })
}
