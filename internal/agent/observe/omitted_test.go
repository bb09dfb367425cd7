package observe

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// The RA red team's findings (issue 42, this round): each test fails on the
// code it was written against.

// restarted is a fresh corroborating State on eth0, seeded with the digest
// an agent published before it restarted, that has heard the router's first
// word (offering router) and believed it as agreed does.
func restarted(t *testing.T, seed digest.Node, at time.Time, router []RAPrefix) *State {
	t.Helper()
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s.Seed(seed)
	s.RA("eth0", routerA, at, router)
	solicit(t, s, at.Add(time.Millisecond))
	s.RA("eth0", routerA, at.Add(2*time.Millisecond), router)
	again := at.Add(2*time.Millisecond + MinDelayBetweenRAs)
	solicit(t, s, again)
	s.RA("eth0", routerA, again.Add(time.Millisecond), router)
	s.Settle(again.Add(MaxRADelay + testMargin))
	return s
}

// A prefix the router deprecated stays deprecated across an agent restart.
// The agent seeds what it published (Seed: vouchSeed), and a SLAAC address
// in a prefix vouched only by the seed counts with the kernel's flags - but
// the kernel keeps a SLAAC address preferred on any RA's word: a router
// that renumbered by omitting the old prefix never deprecates it in the
// kernel (only in the agent, OmitDeprecates), and a spoofer's replay of the
// router's old RA makes it preferred again after a withdrawal. Once a
// believed RA no longer states the prefix, the vouchRA rule (never
// preferred) holds only for an agent that did not restart.
func TestADeprecatedPrefixStaysDeprecatedAcrossAnAgentRestart(t *testing.T) {
	renumber := t0.Add(time.Minute)
	for _, tc := range []struct {
		name string
		// router: what the router says from the renumbering on
		router []RAPrefix
		// kernel: the kernel's SLAAC address in A after the restart
		kernel Address
		replay bool // the agent hears the spoofer's replay too
	}{
		// The router stopped mentioning A (the docs: "routers that just stop
		// mentioning it ... renumber"); the kernel keeps A's address
		// preferred for the 30 min it was last told. No adversary at all.
		{"A omitted, its address preferred by the kernel", offer(pB),
			Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 29 * time.Minute}, false},
		// The router withdrew A (valid 0, the kernel keeps the address 2 h,
		// RFC 4862 5.5.3 e); a spoofer replays the router's old RA offering
		// A preferred, and the kernel makes the address preferred again.
		{"A withdrawn, a replay of the old RA makes its address preferred", append(offer(pB), RAPrefix{pA, 0, 0, true}),
			Address{Addr: addr(pA, 1), Valid: 2 * time.Hour, Preferred: 30 * time.Minute}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Before the restart: A believed, then the router renumbers to B.
			s := agreed(t)
			s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, t0.Add(10*time.Second))
			spoofed(t, s, renumber, tc.router, tc.router) // the router's own word, asked and answered
			s.Address("eth0", Address{Addr: addr(pB, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, renumber.Add(3*time.Second))
			before, _ := s.Snapshot(renumber.Add(30 * time.Second))
			got, _ := digest.Encode(before)
			if preferredIn(before, pA.String()) || !preferredIn(before, pB.String()) {
				t.Fatalf("before the restart: %s, want B preferred and A not", got)
			}

			// The agent restarts a minute later, seeded with that digest.
			at := renumber.Add(2 * time.Minute)
			s2 := restarted(t, before, at, tc.router)
			if tc.replay {
				s2.RA("eth0", routerA, at.Add(5*time.Second), offer(pA)) // the replay the kernel took
			}
			s2.Address("eth0", tc.kernel, false, at.Add(5*time.Second))
			s2.Address("eth0", Address{Addr: addr(pB, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, at)
			for _, d := range []time.Duration{10 * time.Second, 5 * time.Minute, 20 * time.Minute} {
				n, _ := s2.Snapshot(at.Add(d))
				if preferredIn(n, pA.String()) {
					got, _ := digest.Encode(n)
					t.Errorf("+%s after the restart the agent reports A preferred again: %s (before: %s)", d, got, func() string { e, _ := digest.Encode(before); return e }())
				}
			}
		})
	}
}

func preferredIn(n digest.Node, p string) bool {
	for _, l := range n.Links {
		for _, dp := range l.Prefixes {
			if dp.Prefix.String() == p && !dp.Deprecated {
				return true
			}
		}
	}
	return false
}

// omittedThenRestarted: the router renumbers A to B at renumber, omitting
// A (the kernel's SLAAC addresses in both); s is the agent that heard it, s2
// the same agent restarted at at, seeded with s's digest, that has believed
// the router's first word since (B).
func omittedThenRestarted(t *testing.T) (s, s2 *State, renumber, at time.Time) {
	t.Helper()
	s = agreed(t)
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, t0.Add(10*time.Second))
	renumber = t0.Add(time.Minute)
	spoofed(t, s, renumber, offer(pB), offer(pB)) // the router's own renumbering, A omitted
	s.Address("eth0", Address{Addr: addr(pB, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, renumber.Add(3*time.Second))
	before, _ := s.Snapshot(renumber.Add(30 * time.Second))
	if preferredIn(before, pA.String()) || !preferredIn(before, pB.String()) {
		t.Fatalf("before the restart: %+v, want B preferred and A not", before)
	}
	at = renumber.Add(2 * time.Minute)
	s2 = restarted(t, before, at, offer(pB))
	s2.Address("eth0", Address{Addr: addr(pB, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, at)
	return s, s2, renumber, at
}

// The same, held for ever: after the restart a spoofer replays the router's
// old RA (A preferred) every 20 minutes. Each replay is contradicted by the
// router and reported, but the kernel takes it too, refreshing A's SLAAC
// address (preferred 30 min, valid 1 h), and the restarted agent counts that
// address with the kernel's flags. The docs bound a stall by the lifetimes
// the router stated; the router stated A's last 30 minutes three hours ago.
func TestAReplayedOldRAHoldsNothingPreferredAfterARestart(t *testing.T) {
	_, s2, renumber, at := omittedThenRestarted(t)
	var held []time.Duration
	reported := 0
	for i := 1; i <= 9; i++ {
		replay := at.Add(time.Duration(i) * 20 * time.Minute)
		spoofed(t, s2, replay, offer(pA), offer(pB))
		if len(s2.Conflicts("eth0", replay.Add(10*time.Second))) > 0 {
			reported++
		}
		// The kernel takes the replay (RFC 4862 5.5.3 e: valid 1 h is no
		// shortening), and the router's RAs refresh B.
		s2.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, replay)
		s2.Address("eth0", Address{Addr: addr(pB, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, replay)
		s2.RA("eth0", routerA, replay.Add(time.Minute), offer(pB))
		if n, _ := s2.Snapshot(replay.Add(10 * time.Minute)); preferredIn(n, pA.String()) {
			held = append(held, replay.Add(10*time.Minute).Sub(renumber))
		}
	}
	if len(held) > 0 {
		t.Errorf("A, omitted by the router at +0, reported preferred at %v after it (routerA reported in conflict after %d of the 9 replays, for a minute each)", held, reported)
	}
}

// The attack the restart hole opens, end to end on one agent: a spoofer
// that answers every RA of the router with a replay of its RA from before
// the last renumbering (A preferred) holds the router's current offer B
// doubted (corroborate.go: restated, it is a proposal, contradicted each
// time), so B runs out of its stated preferred lifetime - the documented
// bound - while the kernel, taking each replay, keeps A's SLAAC address
// preferred. An agent that did not restart then reports nothing preferred
// (the stall the docs accept); one that restarted since A was omitted
// reports A preferred, alone: a digest on which the ballot adopts A, the
// prefix the router stopped offering (decide's
// TestARenumberingIsNotHeldByAPrefixTheRouterOmitted, second case).
func TestASpooferCannotBringBackAPrefixTheRouterOmitted(t *testing.T) {
	s, s2, _, at := omittedThenRestarted(t)
	// From +5 min on, the router advertises B every 3 min; the spoofer
	// replays the old RA around each, and the kernel takes both.
	var now time.Time
	for i := range 20 {
		now = at.Add(5*time.Minute + time.Duration(i)*3*time.Minute)
		for _, st := range []*State{s, s2} { // the agent that did not restart hears the same
			spoofed(t, st, now, offer(pA), offer(pB))
			st.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, now)
			st.Address("eth0", Address{Addr: addr(pB, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, now)
		}
	}
	if n := mustSnapshot(s, now.Add(time.Minute)); preferredIn(n, pA.String()) || preferredIn(n, pB.String()) {
		got, _ := digest.Encode(n)
		t.Errorf("the agent that did not restart reports %s, want nothing preferred (the documented stall)", got)
	}
	got := encode(t, s2, now.Add(time.Minute))
	if preferredIn(mustSnapshot(s2, now.Add(time.Minute)), pA.String()) {
		t.Errorf("after an hour of replays (conflict reported: %v) the restarted agent reports %s: A, omitted by the router, preferred alone", s2.Conflicts("eth0", now.Add(time.Second)), got)
	}
}

func mustSnapshot(s *State, now time.Time) digest.Node {
	n, _ := s.Snapshot(now)
	return n
}
