package observe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// What a memory may not put back (memory.go, --state-dir): each test
// failed on the code it was written against (a red team's reading of the
// memory), and says below what that code did.

// A restart is a gap like no other: the router may have renumbered while
// the agent was down, unheard. A restatement of the remembered offer read
// after it must be put to the router again (as after a reopened socket,
// reads.go forget), never refreshed as re-sent alike: a replay of the
// router's old RA, answering the listener's first solicitation before the
// router does, moved the remembered ends on to the restart plus the
// stated lifetimes - past anything the router stated - and the router's
// new word, contradicted by the replays from then on, could not end them
// (the documented stall, but from ends the router never stated).
//
// The router re-sends A alike (30 min preferred), its last word of A heard
// at +59s; the agent goes down at +1m; the router reloads onto B at +2m,
// omitting A (its last statement of A: preferred until +32m); the agent
// restarts at +20m from its memory, and a spoofer replays the router's old
// RA at once and after each router word. With the memory's words restored
// re-sent alike, A was believed preferred until +50m, 18 minutes past the
// router's word: the excess is the downtime, up to the router's preferred
// lifetime (radvd: 4 h). None is restored alike now.
func TestAReplayRightAfterARestartRefreshesNothing(t *testing.T) {
	s := agreed(t)
	s.AwaitReads = true
	resent(t, s, t0.Add(30*time.Second)) // the router re-sends alike
	last := t0.Add(59 * time.Second)
	s.RA("eth0", routerA, last, offer(pA)) // its last word of A the agent heard
	s.Read("eth0", last)
	down := t0.Add(time.Minute)
	before, mem := mustSnapshot(s, down), s.Memory(down)
	if w := mem.Links[0].Words; len(w) != 1 || !w[0].Alike {
		t.Fatalf("memory %+v: want A, re-sent alike", mem)
	}
	reload := t0.Add(2 * time.Minute) // unheard: the agent is down
	stated := reload.Add(30 * time.Minute)

	restart := t0.Add(20 * time.Minute)
	s2 := newState()
	s2.AwaitReads = true
	s2.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s2.Seed(before)
	s2.Remember(mem, restart)
	s2.Solicited("eth0", restart) // the listener's, as it starts
	replay := func(at time.Time) {
		s2.Heard("eth0", routerA, at, offer(pA), false)
		s2.Read("eth0", at)
	}
	replay(restart.Add(time.Millisecond))                                        // the spoofer answers first
	s2.Heard("eth0", routerA, restart.Add(5*time.Millisecond), offer(pB), false) // the router's answer
	replay(restart.Add(6 * time.Millisecond))
	for at := restart.Add(3 * time.Second); at.Before(restart.Add(40 * time.Minute)); at = at.Add(3 * time.Second) {
		s2.RA("eth0", routerA, at, offer(pB))
		replay(at.Add(time.Millisecond))
		if due, _ := s2.Solicit(at.Add(2 * time.Millisecond)); len(due) > 0 {
			s2.Solicited("eth0", at.Add(2*time.Millisecond))
			replay(at.Add(3 * time.Millisecond))
			s2.Heard("eth0", routerA, at.Add(4*time.Millisecond), offer(pB), false)
		}
	}
	if e, ok := s2.links["eth0"].ra[raKey{pA, routerA}]; ok && time.Time(e.preferred).After(stated.Add(LifetimeSlack)) {
		t.Errorf("A believed preferred until +%s; the router last stated it preferred until +%s (its reload onto B, unheard while the agent was down)",
			time.Time(e.preferred).Sub(t0), stated.Sub(t0))
	}
	at := stated.Add(5 * time.Minute)
	if n := mustSnapshot(s2, at); preferredIn(n, pA.String()) {
		t.Errorf("+%s, 5 min past the router's last word of A: %s (conflicts %v)", at.Sub(t0), encode(t, s2, at), s2.Conflicts("eth0", at))
	}
}

// --conflict-bound is "a bound the user sets" on a stall (issue 42): with
// two speakers on the router's address, its believed offer stays preferred
// no longer than the bound after their first contradiction. A user who
// sees a stall reported and sets the bound to end it restarts the agents to
// apply it (a flag: a rollout). The memory puts the stalled offer back
// doubted, and doubt never caps an offer already doubted: when Remember
// kept its preferred end where the router's lifetimes put it, the new
// bound did not apply to the stall it was set for. The router offers A
// (preferred 30 min, stated last at about t0+3s); a spoofer on its address
// deprecates A from +1m on; the user sets --conflict-bound 5m and the
// agents restart at +5m; the spoofer goes on. At +15m (the bound 10 min
// past the restart) the restarted agent reported A preferred, until +30m;
// now A is preferred no longer than the bound past the restart.
func TestAConflictBoundSetAfterAStallAppliesToIt(t *testing.T) {
	s := agreed(t)
	deprecatedA := []RAPrefix{{pA, time.Hour, 0, true}}
	spoofed(t, s, t0.Add(time.Minute), deprecatedA, offer(pA))
	restart := t0.Add(5 * time.Minute)
	if len(s.Conflicts("eth0", t0.Add(time.Minute+time.Second))) == 0 {
		t.Fatal("the spoofer's word is not reported as a conflict: the scenario is off")
	}
	before, mem := mustSnapshot(s, restart), s.Memory(restart)

	s2 := newState()
	s2.ConflictBound = 5 * time.Minute // the user's new bound
	s2.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s2.Seed(before)
	s2.Remember(mem, restart)
	s2.Solicited("eth0", restart)
	for at := restart.Add(time.Millisecond); at.Before(t0.Add(16 * time.Minute)); at = at.Add(30 * time.Second) {
		s2.RA("eth0", routerA, at, offer(pA))
		s2.RA("eth0", routerA, at.Add(time.Millisecond), deprecatedA)
	}
	at := t0.Add(15 * time.Minute)
	if n := mustSnapshot(s2, at); preferredIn(n, pA.String()) {
		t.Errorf("+%s, 10 min past the restart with --conflict-bound %s, the stall goes on: %s (conflicts %v)",
			at.Sub(t0), s2.ConflictBound, encode(t, s2, at), s2.Conflicts("eth0", at))
	}
}

// A memory older than the digest the agent published last - its writes
// failed (a full or read-only /var: one warning, a metric), the agent was
// rolled back to a release without the memory and forward again, or ran a
// while with --state-dir= - must not put back over the digest a prefix
// the digest carried deprecated. The router renumbers A to B (A
// deprecated), believed; the digest says B preferred, A deprecated; the
// memory still says A preferred, re-sent alike. After a restart a spoofer
// replaying the router's old RA contradicts each of the router's words: B
// is never believed again. When Remember put the stale word back as it
// was, the restarted agent reported A preferred and no B - the spoofer
// moved the node back to the prefix the router left, where an agent that
// did not restart holds B, and one with no memory at all keeps A
// deprecated (the seed: a prefix the digest carried deprecated stays so).
// Now the word is put back deprecated, as the digest said.
func TestAMemoryOlderThanTheDigestPutsNoDeprecatedPrefixBack(t *testing.T) {
	s := agreed(t)
	resent(t, s, t0.Add(30*time.Second))
	stale := s.Memory(t0.Add(time.Minute)) // the last write that succeeded
	renumbered := []RAPrefix{{pB, time.Hour, 30 * time.Minute, true}, {pA, time.Hour, 0, true}}
	renumber := t0.Add(2 * time.Minute)
	s.RA("eth0", routerA, renumber, renumbered)
	solicit(t, s, renumber.Add(time.Millisecond))
	s.RA("eth0", routerA, renumber.Add(2*time.Millisecond), renumbered)
	restart := t0.Add(10 * time.Minute)
	before := mustSnapshot(s, restart)
	if !preferredIn(before, pB.String()) || preferredIn(before, pA.String()) {
		t.Fatalf("before the restart: %s, want B preferred and A deprecated", encode(t, s, restart))
	}

	s2 := newState()
	s2.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s2.Seed(before)
	s2.Remember(stale, restart)
	s2.Solicited("eth0", restart)
	for at := restart.Add(time.Millisecond); at.Before(restart.Add(2 * time.Minute)); at = at.Add(10 * time.Second) {
		s2.RA("eth0", routerA, at, offer(pA)) // the replay, first
		s2.RA("eth0", routerA, at.Add(time.Millisecond), renumbered)
		s2.RA("eth0", routerA, at.Add(2*time.Millisecond), offer(pA))
	}
	at := restart.Add(time.Minute)
	if n := mustSnapshot(s2, at); preferredIn(n, pA.String()) {
		t.Errorf("a minute after the restart: %s (conflicts %v); the digest before it said %s",
			encode(t, s2, at), s2.Conflicts("eth0", at), encode(t, s, restart))
	}
}

// Every router's word of a prefix the digest carried deprecated is put
// back deprecated, not the first alone: a restored word takes the prefix
// out of the seed (a remembered prefix is vouched for by an RA), and a
// rule that read the seed inside the loop put the second router's word
// back preferred.
func TestEveryRememberedWordOfAPrefixTheDigestCarriedDeprecatedIsDeprecated(t *testing.T) {
	restart := t0.Add(10 * time.Minute)
	word := func(router netip.Addr) Remembered {
		return Remembered{Router: router, Prefix: pA, Since: t0, Valid: t0.Add(time.Hour), Preferred: t0.Add(30 * time.Minute),
			StatedValid: time.Hour, StatedPreferred: 30 * time.Minute, Heard: t0}
	}
	mem := Memory{At: t0, Links: []LinkMemory{{Name: "eth0", Words: []Remembered{word(routerA), word(routerB)}}}}
	seed, err := digest.Decode("v1;eth0=2001:db8:a::/64 d3120 ra")
	if err != nil {
		t.Fatal(err)
	}
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s.Seed(seed)
	if n := s.Remember(mem, restart); n != 2 {
		t.Fatalf("restored %d words, want 2", n)
	}
	for k, e := range s.links["eth0"].ra {
		if !e.preferred.passed(restart) {
			t.Errorf("%s's word of %s restored preferred until +%s; the digest carried it deprecated", k.router, k.prefix, time.Time(e.preferred).Sub(t0))
		}
	}
	if n := mustSnapshot(s, restart); preferredIn(n, pA.String()) {
		t.Errorf("at the restart: %s, want A deprecated", encode(t, s, restart))
	}
}

// The memory is keyed by the link's name, and names may move between
// interfaces across a reboot (eth0 and eth1 swapped): a link's memory
// carries the interface's own link-layer address, and is not put back on
// an interface whose address differs. Either unknown: put back, as before
// the address was kept.
func TestAMemoryOfAnotherInterfaceIsNotPutBack(t *testing.T) {
	const mac, other = "52:54:00:00:00:01", "52:54:00:00:00:02"
	for _, c := range []struct {
		name         string
		written, now string
		want         int
	}{
		{"the same interface", mac, mac, 1},
		{"another interface", mac, other, 0},
		{"written before the address was kept", "", mac, 1},
		{"an interface with none", mac, "", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := agreed(t)
			s.SetHardware("eth0", c.written)
			mem := s.Memory(t0.Add(time.Minute))
			if got := mem.Links[0].Hardware; got != c.written {
				t.Fatalf("memory written with %q, want %q", got, c.written)
			}
			s2 := newState()
			s2.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
			s2.SetHardware("eth0", c.now)
			if got := s2.Remember(mem, t0.Add(2*time.Minute)); got != c.want {
				t.Errorf("restored %d words, want %d", got, c.want)
			}
		})
	}
}
