package ra

import "time"

// reader keeps, for one socket, what turns the kernel's word into the
// agent's: receive times in the agent's clock, drops, and Read reports.
type reader struct {
	l *Listener
	// wanted: a Sync asked for a Read report not yet made.
	wanted bool
	// last: the latest stamp handed over (stamps never go back);
	// drops: the kernel's count of drops already reported.
	last  time.Time
	drops uint32
}

// now is called before each attempt to read: it takes up a Sync asked for
// so far (one asked later finds the read interrupted again) and returns the
// time the attempt starts.
func (r *reader) now() time.Time {
	if r.l.sync.Swap(false) {
		r.wanted = true
	}
	return r.l.Clock.Now()
}

// empty: the socket was found empty by an attempt that started at t, every
// RA that arrived before t handed over. Drops the kernel counted since are
// reported first: an RA lost before t may have contradicted anything.
func (r *reader) empty(t time.Time, drops uint32) {
	if !r.wanted {
		return
	}
	r.wanted = false
	r.dropped(drops, t)
	if r.l.Reports.Read != nil {
		r.l.Reports.Read(r.l.Link, t)
	}
	// A solicitation sent by t: everything that arrived before it was
	// handed over, so its window may reckon from what was heard.
	if at, ok := r.l.takeSent(t); ok && r.l.Reports.Solicited != nil {
		r.l.Reports.Solicited(r.l.Link, at)
	}
}

// dropped reports drops the kernel counted beyond those reported, as RAs
// lost before at.
func (r *reader) dropped(drops uint32, at time.Time) {
	if drops == r.drops {
		return
	}
	metricDropped.With(r.l.Link).Add(uint64(drops - r.drops)) // modulo 2^32, as the kernel counts
	if r.drops == 0 {
		r.l.Log.Warn(r.l.Link+": the kernel dropped router advertisements (the RA socket's queue was full: a flood); changes waiting to be corroborated are dropped, and come again from a router that means them",
			"dropped", drops)
	}
	r.drops = drops
	if r.l.Reports.Lost != nil {
		r.l.Reports.Lost(r.l.Link, at)
	}
}

// stamp returns when p arrived, in the agent's clock.
//
// The kernel stamps each message when the link handed it over, on the wall
// clock (CLOCK_REALTIME). The agent's clock is the real clock in production,
// whose Now carries the wall time and a monotonic reading; tests inject
// another. So the stamp is taken as an age - how long the message waited, by
// the wall clock, until now - and the message arrived that long before the
// agent's Now. A wall clock stepped while it waited makes the age wrong: a
// negative one counts as zero (the message is stamped when read, as without
// kernel stamps), and stamps never go back, so words stay in the order they
// arrived. Without a kernel stamp, the message is stamped when read.
func (r *reader) stamp(p packet) time.Time {
	// The agent's clock first: the age, read after it, errs long, and the
	// stamp early - a contradiction counts before a window's end rather
	// than after.
	at := r.l.Clock.Now()
	if !p.stamp.IsZero() {
		if age := time.Now().Round(0).Sub(p.stamp); age > 0 {
			at = at.Add(-age)
		}
	}
	at = later(r.last, at)
	r.last = at
	return at
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
