// The window, fitted to the router: how long after a Router Solicitation a
// conforming router may take to answer it (RFC 4861 6.2.6), learned from how
// the router at an address answers, never from what an attacker on it could
// fake into a shorter wait.
//
//   - A router that unicasts its answers sends them within MAX_RA_DELAY_TIME
//     (0.5 s; radvd at once, AdvRASolicitedUnicast on, its default).
//   - A router that multicasts them sends them within MAX_RA_DELAY_TIME too,
//     but no sooner than MIN_DELAY_BETWEEN_RAS (3 s) after its last multicast
//     RA plus the same random delay (radvd, AdvRASolicitedUnicast off): up to
//     3.5 s after it last spoke to all nodes.
//
// An address is taken to unicast its answers only once a solicitation drew a
// unicast RA from it and no multicast RA came from it until a multicasting
// router's answer would have: a router that multicasts its answers always
// multicasts one then, and an attacker on its address can add RAs but cannot
// remove the router's. Anything else (unknown, evicted, both) waits the
// multicast bound: the last multicast RA heard from the address (or, not
// knowing, the first solicitation since the link was listened to) plus 3.5 s.

package observe

import (
	"net/netip"
	"time"
)

// RFC 4861 6.2.6's router constants.
const (
	MaxRADelay         = 500 * time.Millisecond // MAX_RA_DELAY_TIME
	MinDelayBetweenRAs = 3 * time.Second        // MIN_DELAY_BETWEEN_RAS
)

// voice is what a link remembers of how one address speaks.
type voice struct {
	last, lastUnicast, lastMcast time.Time
	// unicast: it answers solicitations unicast (learned, see above).
	unicast bool
	probe   probe
}

// probe gathers how an address answered one solicitation.
type probe struct {
	asked, end time.Time // the solicitation; when a multicast answer has come for sure
	uni, multi bool
}

// voiceOf returns what l remembers of r, making room (and remembering, in
// voiceFloor, that an address forgotten may have spoken as late as the one
// pushed out) when maxRouters others are remembered.
func (l *link) voiceOf(r netip.Addr, margin time.Duration) *voice {
	if v := l.voices[r]; v != nil {
		return v
	}
	if len(l.voices) >= maxRouters {
		var victim netip.Addr
		for a, v := range l.voices {
			if !victim.IsValid() || v.last.Before(l.voices[victim].last) {
				victim = a
			}
		}
		v := l.voices[victim]
		l.voiceFloor = later(l.voiceFloor, later(v.last, v.lastMcast))
		delete(l.voices, victim)
	}
	v := &voice{last: l.voiceFloor, lastMcast: l.voiceFloor}
	if !l.asked.IsZero() {
		v.probe = probe{asked: l.asked, end: l.multicastBy(v, l.asked, margin)}
	}
	l.voices[r] = v
	return v
}

// heard records a word from r at at, and returns when r spoke last before it.
func (l *link) heard(r netip.Addr, at time.Time, multicast bool, margin time.Duration) time.Time {
	v := l.voiceOf(r, margin)
	v.conclude(at)
	prev := v.last
	v.last = later(v.last, at)
	if multicast {
		v.lastMcast = later(v.lastMcast, at)
	} else {
		v.lastUnicast = later(v.lastUnicast, at)
	}
	if pr := &v.probe; !pr.asked.IsZero() && !at.Before(pr.asked) {
		// A multicast RA at the very time of the solicitation counts too:
		// doubt leans to the longer wait.
		pr.multi = pr.multi || (multicast && !at.After(pr.end))
		pr.uni = pr.uni || (!multicast && at.After(pr.asked) && !at.After(pr.asked.Add(MaxRADelay+margin)))
	}
	return prev
}

// conclude learns from the probe whose window ended by now.
func (v *voice) conclude(now time.Time) {
	pr := v.probe
	if pr.asked.IsZero() || now.Before(pr.end) {
		return
	}
	switch {
	case pr.multi:
		v.unicast = false
	case pr.uni:
		v.unicast = true
	}
	v.probe = probe{}
}

// probeAll starts, on every address l remembers, a probe of the
// solicitation sent at at (an earlier one still open is dropped: a
// multicasting router's answer to it falls in the new one's window too).
// An earlier probe concludes only if the link was read to its end (known,
// reads.go): an answer still unread would be missed.
func (l *link) probeAll(at time.Time, margin time.Duration) {
	if l.firstAsked.IsZero() {
		l.firstAsked = at
	}
	for _, v := range l.voices {
		v.conclude(l.known)
		v.probe = probe{asked: at, end: l.multicastBy(v, at, margin),
			// Words handled before the report of the send: the times say.
			uni: v.lastUnicast.After(at), multi: !v.lastMcast.Before(at)}
	}
}

// multicastBy is when a router at v's address that multicasts its answers
// has answered a solicitation sent at at, plus margin.
func (l *link) multicastBy(v *voice, at time.Time, margin time.Duration) time.Time {
	m := later(l.firstAsked, l.voiceFloor)
	if m.IsZero() || m.After(at) || l.known.Before(at) {
		// Never solicited before, or RAs that arrived before at may be
		// still unread (reads.go): it may have multicast just now.
		m = at
	}
	if v != nil {
		m = later(m, v.lastMcast)
	}
	return later(at.Add(MaxRADelay), m.Add(MinDelayBetweenRAs+MaxRADelay)).Add(margin)
}

// answerBy is when the router at r has answered a solicitation sent at at,
// plus margin: the window a proposal asked then waits.
func (l *link) answerBy(r netip.Addr, at time.Time, margin time.Duration) time.Time {
	v := l.voices[r]
	if v != nil {
		v.conclude(at)
		if v.unicast {
			return at.Add(MaxRADelay + margin)
		}
		if v.probe.asked.Equal(at) {
			return v.probe.end // reckoned from its last multicast RA before it was asked
		}
	}
	return l.multicastBy(v, at, margin)
}
