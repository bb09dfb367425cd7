package observe

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
)

// Replays that hold a renumbering back across an agent restart hold nothing
// preferred past the router's word. The router renumbers A to B omitting A;
// a spoofer replays its old RA (A preferred) every 5 minutes, so B is never
// believed and A stays believed, doubted, until its stated preferred
// lifetime ends (30 min after the router last stated it). The kernel takes
// every replay: A's address is preferred 30 minutes past the last one. The
// agent restarts 20 minutes in, seeded with A preferred; the replays go on.
// The seed's word (seedCap) ends with the first contradiction: the kernel's
// lifetimes are the replays', not the router's.
func TestReplaysAcrossARestartHoldNothingPreferredPastTheRoutersWord(t *testing.T) {
	s := agreed(t) // the router last stated A at about t0+3s: preferred until t0+30m
	kernelA := func(s *State, at time.Time) {
		s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, at)
	}
	kernelA(s, t0.Add(10*time.Second))
	renumber := t0.Add(time.Minute)
	for i := range 5 {
		at := renumber.Add(time.Duration(i) * 5 * time.Minute)
		spoofed(t, s, at, offer(pA), offer(pB))
		kernelA(s, at)
	}
	restart := renumber.Add(20 * time.Minute)
	before := mustSnapshot(s, restart)
	if !preferredIn(before, pA.String()) || preferredIn(before, pB.String()) {
		t.Fatalf("before the restart: %+v, want A preferred (doubted, within its stated lifetime) and B not", before)
	}

	s2 := newState()
	s2.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s2.Seed(before)
	kernelA(s2, restart) // as the replay at +20m left it: preferred until +50m
	for i := range 6 {
		at := restart.Add(time.Minute + time.Duration(i)*5*time.Minute)
		spoofed(t, s2, at, offer(pA), offer(pB))
		kernelA(s2, at)
	}
	for _, d := range []time.Duration{35 * time.Minute, 45 * time.Minute} {
		if n := mustSnapshot(s2, renumber.Add(d)); preferredIn(n, pA.String()) {
			t.Errorf("+%s after the renumbering (the router stated A preferred until about +29m) the restarted agent reports %s", d, encode(t, s2, renumber.Add(d)))
		}
	}
}
