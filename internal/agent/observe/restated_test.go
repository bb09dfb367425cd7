package observe

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// After a restart the agent holds its first digest (up to its startup
// grace) until Restated: every link believed an RA, and every prefix the
// last digest carried preferred on a router's word was stated again by a
// believed RA. The link's first believed RA ends every seed's cap
// (seedCap), so on a link with two routers a prefix only the second
// states was published deprecated when the first router's RA was
// believed, and preferred again when the second's was: two writes for a
// world that did not change (issue 42; agent's
// TestARestartWithTwoRoutersPublishesNothing).
func TestRestatedWaitsForEveryRoutersPrefix(t *testing.T) {
	for _, c := range []struct {
		name   string
		seed   string
		memory bool // routerB's word on C kept across the restart (memory.go)
		// after routerA's RA (offering A), and after routerB's (offering C)
		afterA, afterB bool
	}{
		{name: "one router", seed: "v1;eth0=2001:db8:a::/64 p ra", afterA: true, afterB: true},
		{name: "a second router's prefix", seed: "v1;eth0=2001:db8:a::/64 p ra,2001:db8:c::/64 p ra", afterA: false, afterB: true},
		{name: "remembered", seed: "v1;eth0=2001:db8:a::/64 p ra,2001:db8:c::/64 p ra", memory: true, afterA: true, afterB: true},
		// A prefix carried deprecated stays so (seedCap): nothing flips.
		{name: "a deprecated prefix", seed: "v1;eth0=2001:db8:a::/64 p ra,2001:db8:c::/64 d600 ra", afterA: true, afterB: true},
		// No router states a static address's prefix: nothing to wait for.
		{name: "an address's prefix", seed: "v1;eth0=2001:db8:a::/64 p ra,2001:db8:c::/64 p addr", afterA: true, afterB: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			seed, err := digest.Decode(c.seed)
			if err != nil {
				t.Fatal(err)
			}
			s := globalOnly("eth0")
			s.Seed(seed)
			if c.memory {
				s.Remember(Memory{At: t0, Links: []LinkMemory{{Name: "eth0", Words: []Remembered{{
					Router: routerB, Prefix: pC, Since: t0.Add(-time.Hour), Valid: t0.Add(time.Hour), Preferred: t0.Add(30 * time.Minute),
					StatedValid: time.Hour, StatedPreferred: 30 * time.Minute, Heard: t0, Alike: true,
				}}}}}, t0)
			}
			if s.Restated() {
				t.Error("restated before any RA")
			}
			s.RA("eth0", routerA, t0.Add(time.Second), offer(pA))
			if got := s.Restated(); got != c.afterA {
				t.Errorf("after routerA's RA: Restated() = %v, want %v", got, c.afterA)
			}
			s.RA("eth0", routerB, t0.Add(2*time.Second), offer(pC))
			if got := s.Restated(); got != c.afterB {
				t.Errorf("after routerB's RA: Restated() = %v, want %v", got, c.afterB)
			}
		})
	}
}

// While routerB's first RA, offering a prefix the seed carried, is put to
// the router, the agent's startup grace is extended (Corroborating), as
// for a link's first RA: its belief is on its way.
func TestASecondRoutersRestatementIsCorroborating(t *testing.T) {
	seed, err := digest.Decode("v1;eth0=2001:db8:a::/64 p ra,2001:db8:c::/64 p ra")
	if err != nil {
		t.Fatal(err)
	}
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s.Seed(seed)
	s.RA("eth0", routerA, t0, offer(pA))
	solicit(t, s, t0.Add(time.Millisecond))
	s.RA("eth0", routerA, t0.Add(2*time.Millisecond), offer(pA))
	s.Settle(t0.Add(2*time.Millisecond + initialWindow))
	if !s.SawRA() || s.Restated() || s.Corroborating() {
		t.Fatalf("routerA believed: SawRA %v, Restated %v, Corroborating %v; want true, false (C unstated), false (nothing pending)",
			s.SawRA(), s.Restated(), s.Corroborating())
	}
	s.RA("eth0", routerB, t0.Add(30*time.Second), offer(pC))
	if !s.Corroborating() {
		t.Error("routerB's RA offering the seeded C under corroboration: Corroborating() = false")
	}
}
