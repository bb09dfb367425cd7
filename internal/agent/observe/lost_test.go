package observe

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
)

// The router renumbers (B alone, A omitted) at +1 min, re-sends it every 4 s
// and answers each solicitation at once; the link is read to the end after
// each RA. Whoever keeps the kernel's queue overflowing (a drop every 500 ms)
// makes the agent forget each change before its window ends: the
// renumbering lands, or the stall is reported (a conflict, a read lag) within
// ConflictBound - never silent.
func TestDropsThatHoldARenumberingBackAreReported(t *testing.T) {
	const onA = "v1;eth0=2001:db8:a::/64 p ra"
	s := agreed(t)
	s.AwaitReads = true
	s.ConflictBound = 2 * time.Minute
	start := t0.Add(time.Minute)
	var silentUntil time.Time
	for now := start; now.Before(start.Add(time.Hour)); now = now.Add(100 * time.Millisecond) {
		k := now.Sub(start)
		if k%(4*time.Second) == 0 {
			s.RA("eth0", routerA, now, offer(pB)) // the router's periodic RA
			s.Read("eth0", now.Add(time.Millisecond))
		}
		if due, _ := s.Solicit(now); len(due) > 0 {
			s.Read("eth0", now)
			s.Solicited("eth0", now)
			s.Heard("eth0", routerA, now.Add(2*time.Millisecond), offer(pB), false) // its answer
			s.Read("eth0", now.Add(3*time.Millisecond))
		}
		if k%(500*time.Millisecond) == 0 {
			s.Lost("eth0", now) // the adversary's bad checksum
		}
		s.Settle(now)
		got := encode(t, s, now)
		reported := len(s.Conflicts("eth0", now)) > 0 || len(s.Behind(now)) > 0
		if got != onA || reported {
			t.Logf("at +%s: %s (reported: %v)", k, got, reported)
			break
		}
		silentUntil = now
	}
	if d := silentUntil.Sub(start); d > s.ConflictBound+fullWindow+SolicitSpacing {
		t.Errorf("the router's renumbering held back %s with A still preferred, no conflict and no read lag reported (ConflictBound %s)",
			d.Round(time.Second), s.ConflictBound)
	}
}

// A probe a periodic multicast RA spoiled is tried again up to maxReprobes
// times in a row; a probe the kernel's drops spoiled counts the same, so
// drops every 500 ms do not keep the agent soliciting for ever.
func TestAProbeLostToADropCountsAsSpoiled(t *testing.T) {
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s.Solicited("eth0", t0)
	s.Heard("eth0", routerA, t0.Add(100*time.Millisecond), offer(pA), false) // its unicast answer
	s.Heard("eth0", routerA, t0.Add(time.Second), offer(pA), true)           // a periodic RA hides it
	sent := 0
	for now := t0.Add(time.Second); now.Before(t0.Add(10 * time.Minute)); now = now.Add(100 * time.Millisecond) {
		if due, _ := s.Solicit(now); len(due) > 0 {
			sent++
			s.Solicited("eth0", now)
			s.Heard("eth0", routerA, now.Add(2*time.Millisecond), offer(pA), false) // the router answers
		}
		if sent > 0 && now.Sub(t0)%(500*time.Millisecond) == 0 {
			s.Lost("eth0", now) // from the first re-probe on
		}
		s.Settle(now)
	}
	t.Logf("re-probes in 10 min: %d, answer modes %v", sent, s.RouterAnswers("eth0", t0.Add(10*time.Minute)))
	if sent > maxReprobes {
		t.Errorf("%d solicitations sent only to learn the answer mode, want at most %d", sent, maxReprobes)
	}
}

// A spoofer's offer from the router's address; the link goes down just after
// the solicitation (a switch reboot) and the router's answer - the
// contradiction - cannot arrive. The listener finds its socket empty (Read),
// but a window spent with the link down settles nothing: the change is
// forgotten.
func TestAWindowSpentWithTheLinkDownBelievesNothing(t *testing.T) {
	const onA = "v1;eth0=2001:db8:a::/64 p ra"
	s := agreed(t)
	s.AwaitReads = true
	at := t0.Add(time.Minute)
	s.RA("eth0", routerA, at, offer(pB)) // the spoofer, speaking as the router
	s.Read("eth0", at.Add(time.Millisecond))
	solicit(t, s, at.Add(time.Millisecond))
	s.Heard("eth0", routerA, at.Add(2*time.Millisecond), offer(pB), false) // the spoofer answers at once
	s.Link("eth0", false, at.Add(3*time.Millisecond))                      // the link goes down
	end, _ := s.NextDeadline(at.Add(3 * time.Millisecond))
	s.Read("eth0", end) // the socket is empty: nothing can arrive
	s.Link("eth0", true, end.Add(time.Minute))
	if got := encode(t, s, end.Add(time.Minute)); got != onA {
		t.Errorf("a window spent with the link down settled: %s", got)
	}
}

// A flood makes the kernel drop the router's multicast RA at T (an attacker
// draws one at will: an RS to the router). The spoofer then sends its offer
// unicast from the router's address and answers the agent's solicitation at
// once. The router, having multicast at T, may hold its answer until T+3.5 s
// (RFC 4861 6.2.6): the window reckons from the drop, not from the last
// multicast RA the agent read (a minute ago), so nothing is believed before
// the router's answer.
func TestADroppedRAMayHaveBeenTheRoutersMulticast(t *testing.T) {
	const onA = "v1;eth0=2001:db8:a::/64 p ra"
	s := agreed(t)
	s.AwaitReads = true
	if m := s.RouterAnswers("eth0", t0.Add(time.Minute)); m[AnswersUnicast] != 0 {
		t.Fatalf("modes %v", m)
	}
	T := t0.Add(time.Minute)
	// The router's multicast RA at T (offer A, as ever) is dropped by the
	// kernel with the flood's junk: all the agent learns is the drop.
	s.Lost("eth0", T.Add(50*time.Millisecond))
	s.Read("eth0", T.Add(100*time.Millisecond))
	h := T.Add(200 * time.Millisecond)
	s.Heard("eth0", routerA, h, offer(pB), false) // the spoofer, unicast
	s.Read("eth0", h.Add(time.Millisecond))
	at := h.Add(time.Millisecond)
	solicit(t, s, at)
	s.Heard("eth0", routerA, at.Add(time.Millisecond), offer(pB), false) // the spoofer answers at once
	routerAnswer := T.Add(MinDelayBetweenRAs + 400*time.Millisecond)     // within RFC 4861's bound
	end, _ := s.NextDeadline(at.Add(time.Millisecond))
	t.Logf("window ends %s after the solicitation; the router may answer until %s after it",
		end.Sub(at), T.Add(MinDelayBetweenRAs+MaxRADelay).Sub(at))
	s.Read("eth0", end)
	if got := encode(t, s, end); got != onA && end.Before(routerAnswer) {
		t.Errorf("believed before the router's answer (at +%s): %s", routerAnswer.Sub(at), got)
	}
}

// No renumbering at all: the router re-sends its offer (the same lifetimes,
// every 4 s) and answers every solicitation while the kernel reports a drop
// every 500 ms. The router's offer stays believed and preferred while it
// states it, or the stall is reported.
func TestDropsThatHoldARefreshBackAreReported(t *testing.T) {
	for _, calm := range []time.Duration{0, 30 * time.Second} {
		t.Run("attack from +"+calm.String(), func(t *testing.T) { lostDeprecates(t, calm) })
	}
}

func lostDeprecates(t *testing.T, calm time.Duration) {
	const onA = "v1;eth0=2001:db8:a::/64 p ra"
	s := agreed(t)
	s.AwaitReads = true
	s.ConflictBound = 2 * time.Minute
	start := t0.Add(time.Minute)
	for now := start; now.Before(start.Add(time.Hour)); now = now.Add(100 * time.Millisecond) {
		k := now.Sub(start)
		if k%(4*time.Second) == 0 {
			s.RA("eth0", routerA, now, offer(pA)) // the router's periodic RA, as ever
			s.Read("eth0", now.Add(time.Millisecond))
		}
		if due, _ := s.Solicit(now); len(due) > 0 {
			s.Read("eth0", now)
			s.Solicited("eth0", now)
			s.Heard("eth0", routerA, now.Add(2*time.Millisecond), offer(pA), false) // its answer
			s.Read("eth0", now.Add(3*time.Millisecond))
		}
		if k >= calm && k%(500*time.Millisecond) == 0 {
			s.Lost("eth0", now)
		}
		s.Settle(now)
		reported := len(s.Conflicts("eth0", now)) > 0 || len(s.Behind(now)) > 0
		if got := encode(t, s, now); got != onA && !reported {
			t.Fatalf("at +%s, the router still offering A preferred: %s, nothing reported", k, got)
		}
	}
}
