package observe

import (
	"testing"
	"time"
)

// A window is settled by what the agent has read, however late it reads:
// the router renumbers to B at +1 min and answers the solicitation; the
// clock passes the window's end before anything says the link was read
// that far.
func TestAWindowIsSettledByWhatWasRead(t *testing.T) {
	const (
		onA = "v1;eth0=2001:db8:a::/64 p ra"
		onB = "v1;eth0=2001:db8:a::/64 d3515 ra,2001:db8:b::/64 p ra"
	)
	at := t0.Add(time.Minute)
	tests := []struct {
		name string
		read func(s *State, end, late time.Time)
		want string
		// behind: the link still waits for reads at late.
		behind bool
	}{
		{name: "nothing read past the window's end: nothing believed yet", read: func(*State, time.Time, time.Time) {}, want: onA, behind: true},
		{name: "the listener found the socket empty at the end", read: func(s *State, end, late time.Time) { s.Read("eth0", end) }, want: onB},
		{name: "the listener found it empty just before the end", read: func(s *State, end, late time.Time) { s.Read("eth0", end.Add(-time.Millisecond)) }, want: onA, behind: true},
		{name: "an RA that arrived after the end was read", read: func(s *State, end, late time.Time) {
			s.RA("eth0", routerA, end.Add(time.Millisecond), offer(pB)) // the router's next RA
		}, want: onB},
		{name: "a contradiction that arrived before the end, read late", read: func(s *State, end, late time.Time) {
			s.RA("eth0", routerA, end.Add(-time.Millisecond), offer(pA))
			s.Read("eth0", late)
		}, want: "v1;eth0 conflict=2001:db8:a::/64 p ra"},
		{name: "RAs the kernel dropped before the end: the change is forgotten, and that is reported", read: func(s *State, end, late time.Time) {
			s.Lost("eth0", end.Add(-time.Millisecond))
			s.Read("eth0", late)
		}, want: "v1;eth0 conflict=2001:db8:a::/64 p ra"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := agreed(t)
			s.AwaitReads = true
			s.RA("eth0", routerA, at, offer(pB)) // B alone: A omitted
			// The listener reports a solicitation once the link is read
			// up to it (ra.reader).
			s.Read("eth0", at.Add(time.Millisecond))
			solicit(t, s, at.Add(time.Millisecond))
			s.RA("eth0", routerA, at.Add(2*time.Millisecond), offer(pB)) // its answer
			end, ok := s.NextDeadline(at.Add(2 * time.Millisecond))
			// Read up to the solicitation, the window reckons from the
			// router's last multicast RA (B's, at), not from the
			// solicitation as when RAs before it might be unread; the
			// router may be in its initial phase (a reload).
			if want := at.Add(initialWindow); !ok || !end.Equal(want) {
				t.Fatalf("the window ends at +%s, want +%s", end.Sub(at), want.Sub(at))
			}
			late := end.Add(5 * time.Second) // when the agent gets round to it
			if got := encode(t, s, late); got != onA {
				t.Fatalf("settled by the clock: %s", got)
			}
			tc.read(s, end, late)
			if got := encode(t, s, late); got != tc.want {
				t.Errorf("digest %s, want %s", got, tc.want)
			}
			if _, got := s.Behind(late)["eth0"]; got != tc.behind {
				t.Errorf("Behind: %v, want %v", got, tc.behind)
			}
		})
	}
}

// A proposal is asked again for the short window only once the link was
// read past the last solicitation: with RAs before it unread the window
// would be the long one again, and a reader lagging behind would solicit
// every spacing for nothing.
func TestALaggingReaderAsksNothingAgain(t *testing.T) {
	s := agreed(t)
	s.AwaitReads = true
	at := t0.Add(time.Minute)
	s.RA("eth0", routerA, at, offer(pB))
	s.Read("eth0", at)
	solicit(t, s, at.Add(time.Millisecond))
	// Nothing read after it: the link is read up to at only.
	again := at.Add(MinDelayBetweenRAs)
	if due, next := s.Solicit(again); len(due) != 0 || !next.IsZero() {
		t.Errorf("read up to the RA before the solicitation: Solicit = %v, next %v; want nothing", due, next)
	}
	s.Read("eth0", again)
	if due, _ := s.Solicit(again); len(due) != 1 {
		t.Errorf("read past the solicitation: Solicit = %v, want eth0 due", due)
	}
}
