package observe

import (
	"testing"
	"time"
)

// The listener reopens its socket (a session retried, a restart on the link
// coming up): what arrived in between was queued nowhere.
func TestAReopenedSocketForgetsWhatItMayHaveMissed(t *testing.T) {
	const onA = "v1;eth0=2001:db8:a::/64 p ra"
	tests := []struct {
		name string
		// before: what happens before the reopen at +100 ms; after: the
		// word read after it, at +150 ms.
		before, after func(s *State, a time.Time)
	}{{
		// The router's change B, put to it by a solicitation: its answer
		// - or a contradiction - may have been in the gap.
		name: "a change waiting for its window is forgotten",
		before: func(s *State, a time.Time) {
			s.Heard("eth0", routerA, a.Add(-time.Millisecond), offer(pB), true)
			s.Solicited("eth0", a)
			s.Heard("eth0", routerA, a.Add(time.Millisecond), offer(pB), false)
		},
		after: func(*State, time.Time) {},
	}, {
		// The router's answer to the solicitation went unheard in the gap;
		// a spoofer on its address speaks first after it. Its word is no
		// answer to a solicitation put before the gap.
		name: "a word after the gap answers no solicitation before it",
		before: func(s *State, a time.Time) {
			s.Solicited("eth0", a)
		},
		after: func(s *State, a time.Time) {
			s.Heard("eth0", routerA, a.Add(150*time.Millisecond), offer(pB), false)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := agreed(t)
			s.AwaitReads = true
			a := t0.Add(time.Minute)
			tt.before(s, a)
			s.Reopened("eth0", a.Add(100*time.Millisecond))
			tt.after(s, a)
			end := a.Add(time.Minute)
			s.Read("eth0", end)
			if got := encode(t, s, end); got != onA {
				t.Errorf("believed what the gap may have contradicted: %s", got)
			}
			// The agent's own reopen is no second speaker.
			if c := s.Conflicts("eth0", a.Add(100*time.Millisecond)); len(c) != 0 {
				t.Errorf("a reopen reported %v in conflict", c)
			}
		})
	}
}
