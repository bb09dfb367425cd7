package observe

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/agent/policy"
)

// heardAt is one RA from routerA offering A, at t0 plus at.
type heardAt struct {
	at        time.Duration
	multicast bool
}

// answers is the link's RouterAnswers as unicast, multicast, unknown.
func answers(s *State, at time.Time) []int {
	m := s.RouterAnswers("eth0", at)
	return []int{m[AnswersUnicast], m[AnswersMulticast], m[AnswersUnknown]}
}

// An address is learnt to unicast its answers only when a solicitation drew
// a unicast RA from it and no multicast RA came from it until a router that
// multicasts its answers would have answered; the probe teaches nothing
// before its window ends.
func TestTheAnswerModeIsLearntOnlyFromAMulticastRAsAbsence(t *testing.T) {
	// The listener's first solicitation: the router may have multicast
	// just before, and be in its initial phase (a reload).
	end := initialWindow
	for _, tc := range []struct {
		name  string
		heard []heardAt
		want  []int // unicast, multicast, unknown at the probe's end
	}{
		{"a unicast answer, nothing multicast until the bound", []heardAt{{100 * time.Millisecond, false}}, []int{1, 0, 0}},
		{"a multicast answer", []heardAt{{100 * time.Millisecond, true}}, []int{0, 1, 0}},
		{"a spoofer's unicast at once, the router's multicast answer at the latest", []heardAt{{time.Millisecond, false}, {MinDelayBetweenRAs + MaxInitialRtrAdvertInterval + MaxRADelay, true}}, []int{0, 1, 0}},
		{"a multicast RA at the very time of the solicitation", []heardAt{{0, true}, {100 * time.Millisecond, false}}, []int{0, 1, 0}},
		{"a unicast RA after the router's bound only", []heardAt{{MaxRADelay + testMargin + time.Millisecond, false}}, []int{0, 0, 1}},
		{"a multicast RA just after the probe's end teaches nothing", []heardAt{{100 * time.Millisecond, false}, {end + time.Millisecond, true}}, []int{1, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState()
			s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
			s.Solicited("eth0", t0) // the listener opens
			after := slices.IndexFunc(tc.heard, func(h heardAt) bool { return h.at >= end })
			if after < 0 {
				after = len(tc.heard)
			}
			for _, h := range tc.heard[:after] {
				s.Heard("eth0", routerA, t0.Add(h.at), offer(pA), h.multicast)
			}
			if got := answers(s, t0.Add(end-time.Nanosecond)); got[0] != 0 {
				t.Errorf("learnt unicast before the probe's end: %v", got)
			}
			for _, h := range tc.heard[after:] {
				s.Heard("eth0", routerA, t0.Add(h.at), offer(pA), h.multicast)
			}
			if diff := cmp.Diff(tc.want, answers(s, t0.Add(end+time.Millisecond))); diff != "" {
				t.Errorf("unicast, multicast, unknown (-want +got):\n%s", diff)
			}
		})
	}
}

// At start-up the listener solicits; radvd answers unicast, and its first
// RAs (16 s apart after a start, 3-4 s apart in the test world) may fall in
// the first probe's window. The router's last multicast RA before the agent
// listened is unknown, so it may be in its initial phase and hold its
// answer: the first word's window is that phase's. The agent asks again 3 s
// after the last multicast RA (the periodic one), when any router answers at
// once: the first word is believed, and the mode learnt, 0.5 s plus the
// margin later, and the next renumbering waits that long too.
func TestTheStartUpSolicitationsTeachTheMode(t *testing.T) {
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s.Solicited("eth0", t0)
	s.Heard("eth0", routerA, t0.Add(100*time.Millisecond), offer(pA), false) // its answer: the first word
	s.Heard("eth0", routerA, t0.Add(time.Second), offer(pA), true)           // a periodic RA
	if next, ok := s.NextDeadline(t0.Add(time.Second)); !ok || !next.Equal(t0.Add(initialWindow)) {
		t.Errorf("the first word's window ends at +%s, want +%s", next.Sub(t0), initialWindow)
	}
	again := t0.Add(time.Second + MinDelayBetweenRAs)
	if due, next := s.Solicit(t0.Add(time.Second)); len(due) != 0 || !next.Equal(again) {
		t.Errorf("Solicit = %v, next at +%s; want it asked again at +%s", due, next.Sub(t0), again.Sub(t0))
	}
	solicit(t, s, again)
	s.Heard("eth0", routerA, again.Add(200*time.Millisecond), offer(pA), false)
	learnt := again.Add(MaxRADelay + testMargin)
	if got := encode(t, s, learnt.Add(-time.Nanosecond)); got != "v1;eth0=" {
		t.Fatalf("the first word before its window's end: %s", got)
	}
	if got := encode(t, s, learnt); got != "v1;eth0=2001:db8:a::/64 p ra" {
		t.Fatalf("the first word at its window's end: %s", got)
	}
	if diff := cmp.Diff([]int{1, 0, 0}, answers(s, learnt)); diff != "" {
		t.Errorf("after the second probe (-want +got):\n%s", diff)
	}
	if due, next := s.Solicit(learnt); len(due) != 0 || !next.IsZero() {
		t.Errorf("Solicit = %v, next at %v; want none: the mode is learnt", due, next)
	}
	// The router renumbers.
	at := t0.Add(time.Minute)
	s.RA("eth0", routerA, at, offer(pB))
	solicit(t, s, at.Add(time.Millisecond))
	s.Heard("eth0", routerA, at.Add(2*time.Millisecond), offer(pB), false)
	landsAt(t, s, at.Add(time.Millisecond+MaxRADelay+testMargin))
}

// landsAt checks that B is believed preferred at end, not before.
func landsAt(t *testing.T, s *State, end time.Time) {
	t.Helper()
	if got := encode(t, s, end.Add(-time.Nanosecond)); strings.Contains(got, "2001:db8:b::/64 p") {
		t.Errorf("before the window's end: %s", got)
	}
	if got := encode(t, s, end); !strings.Contains(got, "2001:db8:b::/64 p ra") {
		t.Errorf("at the window's end: %s", got)
	}
}

// An attacker on the router's address who multicasts into every probe's
// window keeps the mode unknown - the multicast bound, the safe side - and
// costs maxReprobes solicitations in a row, no more.
func TestAnAttackerWhoSpoilsEveryProbeCostsAFewSolicitations(t *testing.T) {
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s.Solicited("eth0", t0)
	now := t0
	var sent []time.Duration
	for range 10 {
		s.Heard("eth0", routerA, now.Add(100*time.Millisecond), offer(pA), false) // the router's answer
		s.Heard("eth0", routerA, now.Add(200*time.Millisecond), offer(pA), true)  // the attacker's
		now = now.Add(time.Minute)
		if got := answers(s, now); got[0] != 0 {
			t.Fatalf("learnt unicast: %v", got)
		}
		due, _ := s.Solicit(now)
		if len(due) == 0 {
			break
		}
		s.Solicited("eth0", now)
		sent = append(sent, now.Sub(t0))
	}
	if len(sent) != maxReprobes {
		t.Errorf("solicited again at %v, want %d times", sent, maxReprobes)
	}
	if !slices.IsSorted(sent) {
		t.Errorf("solicitations %v", sent)
	}
}

// A probe that drew nothing - the router's answer lost, or read before the
// send was reported and so not counted - teaches nothing, and is tried
// again like one a periodic RA hid.
func TestAProbeNothingAnsweredIsTriedAgain(t *testing.T) {
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s.Solicited("eth0", t0)                       // the listener opens
	s.Heard("eth0", routerA, t0, offer(pA), true) // a periodic RA
	at := t0.Add(time.Minute)
	s.Heard("eth0", routerA, at.Add(-time.Millisecond), offer(pA), false) // the answer, read first
	s.Solicited("eth0", at)
	end := at.Add(MaxRADelay + testMargin)
	if diff := cmp.Diff([]int{0, 1, 0}, answers(s, end)); diff != "" {
		t.Errorf("after the probe, as the first taught (-want +got):\n%s", diff)
	}
	if due, next := s.Solicit(end); len(due) != 0 || !next.Equal(at.Add(SolicitSpacing)) {
		t.Fatalf("Solicit = %v, next at %v; want the probe again a spacing later", due, next)
	}
	solicit(t, s, at.Add(SolicitSpacing))
	s.Heard("eth0", routerA, at.Add(SolicitSpacing+time.Millisecond), offer(pA), false)
	if diff := cmp.Diff([]int{1, 0, 0}, answers(s, end.Add(SolicitSpacing))); diff != "" {
		t.Errorf("after the second probe (-want +got):\n%s", diff)
	}
}

// The window per answer mode: an address learnt to unicast its answers waits
// MaxRADelay, if it was quiet (no multicast RA) for MinDelayBetweenRAs
// before the proposal's first word - a router reloaded since may multicast
// its answers now; any other waits the RFC 4861 bound from its last
// multicast RA, and - asked within MinDelayBetweenRAs of it, or as the
// link's first solicitation - for a router in its initial phase after a
// reload (radvd holds a rate-limited answer MaxInitialRtrAdvertInterval from
// the last solicitation that came in those 3 s). A router whose
// MinDelayBetweenRAs is above 3 s, as the user says, is waited for so long.
func TestTheWindowPerAnswerMode(t *testing.T) {
	last := t0.Add(time.Minute) // the address's last multicast RA
	for _, tc := range []struct {
		name     string
		mode     string
		first    bool          // the link's first solicitation
		asked    time.Duration // after last
		quiet    time.Duration // the last multicast RA before the proposal's first word, before last
		minDelay time.Duration // State.RouterMinDelay
		want     time.Duration // the window's end, after last
	}{
		{"unicast, asked just after the multicast RA that brought the change", AnswersUnicast, false, time.Second, time.Minute, 0, time.Second + MaxRADelay + testMargin},
		{"unicast, asked just after a multicast RA before the change: it may have reloaded to multicast its answers", AnswersUnicast, false, time.Second, 0, 0, initialWindow},
		{"unicast, asked 3 s or more after that RA: answered at once", AnswersUnicast, false, MinDelayBetweenRAs, 0, 0, MinDelayBetweenRAs + MaxRADelay + testMargin},
		{"multicast, asked just after a multicast RA: the initial phase", AnswersMulticast, false, time.Second, 0, 0, initialWindow},
		{"multicast, asked 3 s or more after it: answered at once", AnswersMulticast, false, MinDelayBetweenRAs, 0, 0, MinDelayBetweenRAs + MaxRADelay + testMargin},
		{"multicast, MinDelayBetweenRAs 6 s, asked 3 s after it: answered 6 s after it", AnswersMulticast, false, MinDelayBetweenRAs, 0, 6 * time.Second, 6*time.Second + MaxInitialRtrAdvertInterval + MaxRADelay + testMargin},
		{"multicast, MinDelayBetweenRAs 6 s, asked 6 s after it: answered at once", AnswersMulticast, false, 6 * time.Second, 0, 6 * time.Second, 6*time.Second + MaxRADelay + testMargin},
		{"unknown, asked just after a multicast RA: the initial phase", AnswersUnknown, false, time.Second, 0, 0, initialWindow},
		{"unknown, the link's first solicitation: the initial phase (its last multicast RA before is unknown)", AnswersUnknown, true, time.Second, 0, 0, time.Second + initialWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := last.Add(tc.asked)
			l := &link{voices: map[netip.Addr]*voice{routerA: {last: last, lastMcast: last, mode: tc.mode}}, known: at, firstAsked: t0, minDelay: tc.minDelay}
			if tc.first {
				l.firstAsked = at
			}
			if got := l.answerBy(routerA, at, last.Add(-tc.quiet), testMargin).Sub(last); got != tc.want {
				t.Errorf("the window ends at +%s after the last multicast RA, want +%s", got, tc.want)
			}
		})
	}
}

// A proposal asked within MinDelayBetweenRAs of its address's last multicast
// RA waits the initial phase's window; it is asked again 3 s after that RA,
// when any router answers at once, and the router's answer then ends the
// wait: a renumbering a multicasting router makes lands 3.75 s after its RA
// (a spoofer's word is contradicted by then - the next test).
func TestAProposalTheRouterMayHoldIsAskedAgain(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	s.RA("eth0", routerA, at, offer(pB)) // its reload RA: it renumbered
	solicit(t, s, at.Add(time.Millisecond))
	if end, ok := s.NextDeadline(at.Add(time.Millisecond)); !ok || !end.Equal(at.Add(initialWindow)) {
		t.Fatalf("the first window ends at +%s, want +%s", end.Sub(at), initialWindow)
	}
	again := at.Add(MinDelayBetweenRAs)
	if due, next := s.Solicit(at.Add(2 * time.Millisecond)); len(due) != 0 || !next.Equal(again) {
		t.Fatalf("Solicit = %v, next at +%s; want +%s", due, next.Sub(at), again.Sub(at))
	}
	solicit(t, s, again)
	s.RA("eth0", routerA, again.Add(time.Millisecond), offer(pB)) // its answer, at once
	landsAt(t, s, at.Add(fullWindow))
	if due, next := s.Solicit(at.Add(fullWindow)); len(due) != 0 || !next.IsZero() {
		t.Errorf("Solicit after = %v, next %v: want nothing more", due, next)
	}
}

// A spoofer on the router's address offers its prefix just after the
// router's reload RA and answers every solicitation at once; the router, in
// its initial phase, holds its answer to the first solicitation 16 s. Asked
// again 3 s after the reload RA, it answers at once and contradicts the
// spoofer within the window: nothing moves, the conflict is reported.
func TestASpooferJustAfterAReloadIsContradictedWhenAskedAgain(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	s.RA("eth0", routerA, at, offer(pA))                                     // the router's reload RA
	s.RA("eth0", routerA, at.Add(200*time.Millisecond), offer(pX))           // the spoofer
	solicit(t, s, at.Add(201*time.Millisecond))                              // held by the router until +16.2 s
	s.Heard("eth0", routerA, at.Add(202*time.Millisecond), offer(pX), false) // the spoofer's answer
	again := at.Add(200*time.Millisecond + MinDelayBetweenRAs)
	if due, next := s.Solicit(at.Add(time.Second)); len(due) != 0 || !next.Equal(again) {
		t.Fatalf("Solicit = %v, next at +%s; want +%s", due, next.Sub(at), again.Sub(at))
	}
	solicit(t, s, again)
	s.Heard("eth0", routerA, again.Add(time.Millisecond), offer(pX), false) // the spoofer, first
	s.RA("eth0", routerA, again.Add(300*time.Millisecond), offer(pA))       // the router, at once
	if got := encode(t, s, at.Add(initialWindow+time.Second)); strings.Contains(got, "2001:db8:bad") || !strings.Contains(got, "2001:db8:a::/64 p") {
		t.Errorf("the spoofer moved something: %s", got)
	}
	if c := s.Conflicts("eth0", again.Add(time.Second)); len(c) != 1 {
		t.Errorf("conflicts = %v, want the router's address", c)
	}
}
