package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
)

// A link the agent watches anew after its first publication starts from
// nothing: the Node carries that publication by then, not the digest the
// agent was started with. Seeded from the start digest (maybe days old),
// the link's kernel addresses in a prefix it carried preferred counted
// with the kernel's flags until the link believed an RA - flags any RA
// sets, a spoofer's too.
func TestALinkWatchedAgainIsNotSeededFromTheStartDigest(t *testing.T) {
	a, rec, clk, _ := startWith(t, Config{StartupGrace: 5 * time.Second, Corroboration: observe.DefaultCorroboration}, "v1;eth0=2001:db8:a::/64 p ra")
	sync_(a)
	// eth0 is no longer watched; the grace ends and the agent publishes.
	a.SetLinks(map[string]policy.Policy{"eth1": {GlobalOnly: true}})
	sync_(a)
	clk.Step(5 * time.Second)
	waitPublishedWith(t, rec, clk, "a digest", func(string) bool { return true })
	// Days later eth0 is watched again; the kernel has an address in A,
	// preferred on the word of some RA the agent never believed.
	clk.Step(72 * time.Hour)
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true}, "eth1": {GlobalOnly: true}})
	a.Address("eth0", slaac(pA), false, clk.Now())
	sync_(a)
	waitPublishedWith(t, rec, clk, "eth0 in it", func(v string) bool { return strings.Contains(v, "eth0") })
	got := rec.values()
	if last := got[len(got)-1]; strings.Contains(last, "2001:db8:a::/64 p") {
		t.Errorf("published %q: A preferred on the kernel's word, vouched by the digest the agent started with 72 h ago", got)
	}
}

// RA red team, second round: a restarted agent publishes the end of the
// seed's cap (observe's seedCap) only at the next unrelated event. Seeded
// with A preferred, no RA heard (the router silent: down, or its words lost
// to a flood), the kernel's address in A first seen preferred for 10 min:
// the agent publishes A preferred on the seed's word, until the cap. A
// host's RA under its own address then makes the kernel's address
// preferred for ever (the kernel takes any router's RA); the address's own
// deadlines are gone, NextDeadline names no other, and the agent sleeps
// through the cap: A stays published preferred past it, for as long as
// nothing else happens on the node.
func TestARestartedAgentPublishesTheEndOfTheSeedsCap(t *testing.T) {
	a, rec, clk, _ := startWith(t, Config{StartupGrace: 5 * time.Second, Corroboration: observe.DefaultCorroboration}, "v1;eth0=2001:db8:a::/64 p ra")
	kernelA := slaac(pA)
	kernelA.Preferred = 10 * time.Minute
	a.Address("eth0", kernelA, false, clk.Now())
	sync_(a)
	clk.Step(5 * time.Second) // the grace: the agent publishes on the seed's word
	waitPublished(t, rec, clk, "v1;eth0=2001:db8:a::/64 p addr")

	clk.Step(time.Minute)
	refreshed := slaac(pA)
	refreshed.Valid, refreshed.Preferred = observe.Infinite, observe.Infinite
	a.Address("eth0", refreshed, false, clk.Now())
	sync_(a)
	clk.Step(10 * time.Minute) // past the cap (10 min after the kernel's address was first seen)
	waitPublishedWith(t, rec, clk, "A deprecated once the seed's cap passed", func(v string) bool {
		return strings.Contains(v, "2001:db8:a::/64 d")
	})
}
