package observe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// A second RA red team's findings on the restart rule (seedCap): each test
// failed on the code it was written against, whose restarted agent knew of
// the router's word only its own last digest and the kernel's addresses.
// The agent's memory of the routers (memory.go, --state-dir) closes them:
// a restarted agent holds what the router stated as a running one does.

// pC is a second router's prefix (routerB) on the same link.
var pC = netip.MustParsePrefix("2001:db8:c::/64")

// contradictedAfterARestart plays a spoofer on routerA that starts
// contradicting the router right after the agent restarted at at (a
// DaemonSet rollout: it may time its moves around one) and goes on every
// 30 s until until: each router word (offering A as it always did) is
// answered with A deprecated from the router's address. routerB, when
// other is not nil, states other and is not spoofed. s is seeded with
// seed and the memory the agent kept on the node (memory.go), and told the
// kernel's SLAAC addresses as they stand at at.
func contradictedAfterARestart(t *testing.T, seed digest.Node, mem Memory, at, until time.Time, other []RAPrefix) *State {
	t.Helper()
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s.Seed(seed)
	s.Remember(mem, at)
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 29 * time.Minute}, false, at)
	if other != nil {
		s.Address("eth0", Address{Addr: addr(pC, 1), Valid: time.Hour, Preferred: 29 * time.Minute}, false, at)
	}
	// The listener's solicitation at start (ra.Listener.Run): both routers
	// answer it.
	s.Solicited("eth0", at)
	s.RA("eth0", routerA, at.Add(time.Millisecond), offer(pA))
	if other != nil {
		s.RA("eth0", routerB, at.Add(time.Millisecond), other)
	}
	deprecatedA := []RAPrefix{{pA, time.Hour, 0, true}}
	s.RA("eth0", routerA, at.Add(2*time.Millisecond), deprecatedA)
	for next := at.Add(30 * time.Second); next.Before(until); next = next.Add(30 * time.Second) {
		s.RA("eth0", routerA, next, offer(pA))
		if other != nil {
			s.RA("eth0", routerB, next, other)
		}
		s.RA("eth0", routerA, next.Add(time.Millisecond), deprecatedA)
	}
	return s
}

// A disagreement moves nothing, across an agent restart too. The router
// offers A preferred (30 min, re-sent alike) and never stops; a spoofer on
// its address answers each of its RAs with A deprecated from the moment
// the agent restarts. An agent that did not restart holds A preferred, its
// believed offer doubted, until the preferred lifetime the router stated
// runs out, and reports the conflict (the documented stall); so does a
// restarted one, from its memory. Before it, the restarted agent's seed
// ended at the first contradiction, and the router's word was never
// believed while the spoofer went on: the digest said A deprecated at once
// - a move made on the spoofer's word, which the router never stated. In a rollout every node restarts in turn; the spoofer
// deprecates the current prefix on each within seconds instead of the
// router's preferred lifetime (4 h by radvd's default, for ever with
// infinite lifetimes).
func TestAContradictionRightAfterARestartDeprecatesNothingTheRouterStates(t *testing.T) {
	s := agreed(t)
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, t0)
	restart := t0.Add(10 * time.Second)
	before, mem := mustSnapshot(s, restart), s.Memory(restart)
	if !preferredIn(before, pA.String()) {
		t.Fatalf("before the restart: %+v, want A preferred", before)
	}
	spoofed(t, s, restart, []RAPrefix{{pA, time.Hour, 0, true}}, offer(pA))
	if n := mustSnapshot(s, restart.Add(time.Minute)); !preferredIn(n, pA.String()) || len(s.Conflicts("eth0", restart.Add(time.Minute))) == 0 {
		t.Fatalf("the agent that did not restart: %s, conflicts %v; want A preferred, the conflict reported (the documented stall)",
			encode(t, s, restart.Add(time.Minute)), s.Conflicts("eth0", restart.Add(time.Minute)))
	}

	s2 := contradictedAfterARestart(t, before, mem, restart, restart.Add(10*time.Minute), nil)
	for _, d := range []time.Duration{20 * time.Second, time.Minute, 5 * time.Minute} {
		now := restart.Add(d)
		if n := mustSnapshot(s2, now); !preferredIn(n, pA.String()) {
			t.Errorf("+%s after the restart (the router states A preferred for 30 min in every RA; conflicts %v) the restarted agent reports %s",
				d, s2.Conflicts("eth0", now), encode(t, s2, now))
		}
	}
}

// With two routers on the link, the same spoofer moves the ballot. routerA
// offers the current prefix A, routerB a second prefix C (both followed;
// the writer's hysteresis keeps A current while both are preferred). After
// a restart the spoofer contradicts routerA alone: routerB's word is
// believed, routerA's never. An agent that did not restart reports both
// preferred, and so must a restarted one. Before the memory it reported A
// deprecated and C preferred; fed to decide.For (3 nodes, A current), such
// digests made C current once 2 of the 3 nodes had restarted: the spoofer
// renumbered the cluster mid-rollout, reported as a conflict.
func TestAContradictionAfterARestartHandsNoVoteToTheOtherRouter(t *testing.T) {
	s := agreed(t)
	heard := t0.Add(10 * time.Second)
	s.RA("eth0", routerB, heard, offer(pC)) // the first word since the last solicitation: its answer
	restart := heard.Add(30 * time.Second)
	before, mem := mustSnapshot(s, restart), s.Memory(restart)
	if !preferredIn(before, pA.String()) || !preferredIn(before, pC.String()) {
		t.Fatalf("before the restart: %s, want A and C preferred", encode(t, s, restart))
	}
	spoofed(t, s, restart, []RAPrefix{{pA, time.Hour, 0, true}}, offer(pA))
	if n := mustSnapshot(s, restart.Add(time.Minute)); !preferredIn(n, pA.String()) || !preferredIn(n, pC.String()) {
		t.Fatalf("the agent that did not restart: %s; want A and C preferred", encode(t, s, restart.Add(time.Minute)))
	}

	s2 := contradictedAfterARestart(t, before, mem, restart, restart.Add(10*time.Minute), offer(pC))
	for _, d := range []time.Duration{20 * time.Second, 5 * time.Minute} {
		now := restart.Add(d)
		n := mustSnapshot(s2, now)
		if !preferredIn(n, pC.String()) {
			t.Fatalf("+%s: routerB's C is not preferred (%s): the scenario is off", d, encode(t, s2, now))
		}
		if !preferredIn(n, pA.String()) {
			t.Errorf("+%s after the restart the restarted agent votes C alone: %s (conflicts %v; routerA states A preferred in every RA)",
				d, encode(t, s2, now), s2.Conflicts("eth0", now))
		}
	}
}

// An RA from a host under its own address lengthens the kernel's lifetimes
// and nothing else: with trustedRouters set the agent records nothing of it
// (Heard returns false), but the kernel forms and refreshes SLAAC addresses
// from any router's RA. So the kernel's lifetimes - the seed's cap after a
// restart (seedCap: "no longer than the kernel's addresses in it were
// preferred when the agent first saw them") - are whatever such a host last
// said, without a word from the router's address to contradict. The router
// states A preferred for 30 min (last at about t0+3s); the host says A
// preferred for ever; the agent restarts at +10m, and from then on a flood
// overflows its socket whenever the router speaks (Lost: the router's
// answers are dropped, reported as a conflict, contradicting nothing). An
// agent that did not restart deprecates A when the router's preferred
// lifetime ends, and so must a restarted one, from its memory. Before it,
// the restarted agent held A preferred on the host's word for as long as
// the flood lasted. (With the router silent - down, or rebooting onto a new
// prefix - no flood is needed.)
func TestAnUntrustedHostsRALengthensNoSeedPastTheRoutersWord(t *testing.T) {
	trusted := map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerA}}}
	host := netip.MustParseAddr("fe80::bad")
	forever := Address{Addr: addr(pA, 1), Valid: Infinite, Preferred: Infinite}

	s := agreed(t)
	s.SetPolicies(trusted)
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, t0)
	said := t0.Add(5 * time.Minute)
	if s.RA("eth0", host, said, []RAPrefix{{pA, Infinite, Infinite, true}}) {
		t.Fatal("an RA from an untrusted host was taken")
	}
	s.Address("eth0", forever, false, said) // the kernel took it
	restart := t0.Add(10 * time.Minute)
	before, mem := mustSnapshot(s, restart), s.Memory(restart)
	if !preferredIn(before, pA.String()) {
		t.Fatalf("before the restart: %s, want A preferred", encode(t, s, restart))
	}
	drops := func(s *State, until time.Time) {
		for at := restart.Add(time.Second); at.Before(until); at = at.Add(time.Minute) {
			s.Lost("eth0", at)
		}
	}
	late := t0.Add(31 * time.Minute) // the router's stated preferred lifetime has ended
	drops(s, late)
	if n := mustSnapshot(s, late); preferredIn(n, pA.String()) {
		t.Fatalf("the agent that did not restart: %s; want A deprecated once the router's preferred lifetime ended", encode(t, s, late))
	}

	s2 := newState()
	s2.SetPolicies(trusted)
	s2.Seed(before)
	s2.Remember(mem, restart)
	s2.Address("eth0", forever, false, restart)
	s2.Solicited("eth0", restart) // the listener's at start; its answer is dropped
	drops(s2, restart.Add(3*time.Hour))
	for _, at := range []time.Time{late, restart.Add(3 * time.Hour)} {
		if n := mustSnapshot(s2, at); preferredIn(n, pA.String()) {
			t.Errorf("+%s (the router stated A preferred until about +30m; conflicts %v) the restarted agent reports %s",
				at.Sub(t0), s2.Conflicts("eth0", at), encode(t, s2, at))
		}
	}
}
