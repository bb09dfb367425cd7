package observe

import (
	"strings"
	"testing"
	"time"
)

// After a gap - a kernel drop, the link down or up, a reopened socket - a
// restatement of the router's believed offer is put to the router again:
// the router may have changed it in the gap. Found by a red team: kept as a
// plain refresh, a replay of the router's old RA read after each drop of a
// flood kept the old prefix preferred for as long as the flood lasted, past
// the lifetimes the router stated and any conflict bound (and in the world:
// radvd renumbered, the agent at 5% CPU, 960,000 RAs, the old prefix still
// preferred 130 s on). Each test failed before.

// floodAndReplay plays, each second from start for span, a kernel drop and
// then a replay of the router's old RA (A) read after it, while the router
// renumbered to B at start and says so every 5 min (radvd's default 200-600
// s); it returns how many seconds a conflict was reported, and how many not.
func floodAndReplay(s *State, start time.Time, span time.Duration) (reported, silent int) {
	for now := start; now.Before(start.Add(span)); now = now.Add(time.Second) {
		if now.Sub(start)%(5*time.Minute) == 0 {
			s.RA("eth0", routerA, now, offer(pB)) // the router's periodic RA gets into the queue
		}
		s.Lost("eth0", now.Add(time.Millisecond))                     // the next packet read carries a higher drop count
		s.RA("eth0", routerA, now.Add(2*time.Millisecond), offer(pA)) // a replay, one of many, gets in
		s.Read("eth0", now.Add(3*time.Millisecond))
		if due, _ := s.Solicit(now.Add(3 * time.Millisecond)); len(due) > 0 {
			s.Solicited("eth0", now.Add(3*time.Millisecond))
		}
		s.Settle(now.Add(4 * time.Millisecond))
		if len(s.Conflicts("eth0", now.Add(4*time.Millisecond))) > 0 {
			reported++
		} else {
			silent++
		}
	}
	return reported, silent
}

func TestAFloodAndReplaysOfTheOldRADoNotKeepItPreferred(t *testing.T) {
	s := agreed(t) // A believed: valid 1 h, preferred 30 min
	s.AwaitReads = true
	resent(t, s, t0.Add(30*time.Second)) // A re-sent alike: a refresh from now on
	start := t0.Add(time.Minute)         // the router renumbers: B alone
	reported, silent := floodAndReplay(s, start, 2*time.Hour)
	got := encode(t, s, start.Add(2*time.Hour))
	t.Logf("at +2h: %s; seconds reported in conflict %d, silent %d", got, reported, silent)
	if strings.Contains(got, "2001:db8:a::/64 p") {
		t.Errorf("A is still preferred 2 h after the router renumbered (it stated A preferred 30 min at most): %s", got)
	}
}

// The same with --conflict-bound 2 min (which bounded only a contradiction,
// so nothing here).
func TestAFloodAndReplaysEndWithinTheConflictBound(t *testing.T) {
	s := agreed(t)
	s.AwaitReads = true
	s.ConflictBound = 2 * time.Minute
	resent(t, s, t0.Add(30*time.Second))
	start := t0.Add(time.Minute)
	floodAndReplay(s, start, time.Hour)
	if got := encode(t, s, start.Add(time.Hour)); strings.Contains(got, "2001:db8:a::/64 p") {
		t.Errorf("A still preferred 1 h after the renumbering, ConflictBound %s: %s", s.ConflictBound, got)
	}
}

// FuzzCorroboration's 47fd3e10407b54f6, crafted: the router renumbers while
// the listener's socket is closed (its B unheard); the new socket solicits,
// and radvd (multicasting its answers, in its initial phase after the
// reload) holds its answer 16 s. A replay of the router's old RA meanwhile
// is put to the router, not a refresh: A's lifetimes stay where the router
// last stated them (they moved 16 s past it).
func TestAReplayAfterAReopenRefreshesNothing(t *testing.T) {
	s := agreed(t)
	s.AwaitReads = true
	resent(t, s, t0.Add(30*time.Second))
	last := t0.Add(59 * time.Second)
	s.RA("eth0", routerA, last, offer(pA)) // the router's last word of A
	s.Read("eth0", last)
	gap := t0.Add(time.Minute) // the socket closes; radvd reloads onto B, unheard
	reopen := gap.Add(time.Second)
	s.Reopened("eth0", reopen)
	s.Read("eth0", reopen.Add(time.Millisecond))
	s.Solicited("eth0", reopen.Add(time.Millisecond)) // held by radvd until +16 s
	for at := reopen.Add(100 * time.Millisecond); at.Before(reopen.Add(16 * time.Second)); at = at.Add(time.Second) {
		s.Heard("eth0", routerA, at, offer(pA), false) // the replay
		s.Read("eth0", at)
		s.Settle(at)
	}
	e := s.links["eth0"].ra[raKey{pA, routerA}]
	stated := last.Add(30 * time.Minute)
	if got := time.Time(e.preferred); got.After(stated.Add(LifetimeSlack)) {
		t.Errorf("A believed preferred until %s after the router's last word of it, which stated 30m0s", got.Sub(last))
	}
}
