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
//
// What was learnt holds only for a solicitation sent MinDelayBetweenRAs or
// more after the address's last multicast RA before the proposal's first
// word (its quiet): a router changes how it answers only on a reload (radvd
// reloaded with AdvRASolicitedUnicast off, a failover peer set up
// otherwise), and a reload multicasts an RA at once. Sent sooner, a router
// reloaded to multicast its answers may hold one as in its initial phase
// (below), so the window is that one. A renumbering's own RA is the
// proposal's first word, not before it: the common case (a router learnt to
// unicast, its reload RA bringing the change, its last periodic RA minutes
// before) keeps the short window. A spoofer's word after a multicast RA of
// the router does not.
//
// RFC 4861's MIN_DELAY_BETWEEN_RAS is 3 s; radvd lets it be set higher
// (MinDelayBetweenRAs). Nothing on the link tells it (an attacker adds RAs),
// so the user does (State.RouterMinDelay, --router-min-delay), and every
// bound below uses it in place of 3 s.
//
// Nothing else can teach it: a unicast RA, or any number of them, an
// attacker sends as well; only a multicast RA's absence is the router's
// word. So a periodic multicast RA of a router that unicasts its answers,
// falling in a probe's window, hides what the probe would teach: it may be
// a multicasting router's answer. A probe's window is shortest - 0.5 s plus
// the margin - when the solicitation goes out 3 s or more after the
// address's last multicast RA (before that a multicasting router may hold
// its answer until then). A probe that drew a unicast answer and a
// multicast RA is therefore tried again (reprobeAt) at that moment, up to
// maxReprobes times in a row, and so is one that drew nothing (its answer
// lost, or read before the send was reported): a router that advertises
// every 200-600 s (radvd's default) almost never spoils one; one that
// advertises every 3-4 s (RFC 4861's least, the test world's) spoils most,
// and with a margin of 0.5 s or more every one, whatever the rule - its
// periodic RAs and a multicasting router's held-back answers fall alike.
//
// The first word after the agent starts is put to the router as if it had
// multicast just before the agent's first solicitation, whatever the
// router: its last multicast RA before the agent listened is unknown, so
// nothing sooner is sound (below: the initial phase's window, and asked
// again 3 s after that solicitation).
//
// radvd 2.19 multicasting its answers goes past that bound after a start or
// reload (a renumbering is one): during its first three RAs (RFC 4861
// 6.2.4's initial phase) it holds a rate-limited answer min(16 s,
// MaxRtrAdvInterval) from the solicitation (reschedule_iface), and a later
// one within those 3 s - an attacker's - pushes it again. Whether a router
// is in its initial phase cannot be told (an attacker adds RAs at will, and
// a router reloads without renumbering), so a solicitation sent within
// MinDelayBetweenRAs of the address's last multicast RA (or of the link's
// first solicitation: the router's last before the agent listened is
// unknown), to any address not learnt to unicast, waits for it: that RA
// plus 3 s + MaxInitialRtrAdvertInterval + 0.5 s. Sent later, the router
// answers at once (radvd's rate limit looks at its own last multicast RA,
// which the agent heard no sooner than it was sent; RFC 4861 likewise), and
// the window is the short one. So a proposal asked with the long window is
// asked again then (askAgainAt), and believed at the end of whichever
// window, answered, ends first: each alone has the router's answer in it.
// A renumbering still lands 3.75 s after the RA that brought it; only
// multicast RAs from the address every 3 s or less (another speaker's, or
// the router's own at RFC 4861's least interval racing the solicitation)
// keep it on the long window.

package observe

import (
	"net/netip"
	"time"
)

// RFC 4861 6.2.6's router constants.
const (
	MaxRADelay         = 500 * time.Millisecond // MAX_RA_DELAY_TIME
	MinDelayBetweenRAs = 3 * time.Second        // MIN_DELAY_BETWEEN_RAS
	// MAX_INITIAL_RTR_ADVERT_INTERVAL (6.2.4): radvd 2.19 holds a
	// rate-limited answer this long from the solicitation during its first
	// three RAs after a start or reload (header).
	MaxInitialRtrAdvertInterval = 16 * time.Second
)

// Answer modes: how an address was last seen to answer a solicitation.
const (
	// AnswersUnknown: no probe has concluded yet.
	AnswersUnknown = "unknown"
	// AnswersUnicast: a solicitation drew a unicast RA and no multicast came
	// until a multicasting router's answer would have (the short window).
	AnswersUnicast = "unicast"
	// AnswersMulticast: a multicast RA came from the address within the
	// bound after the last probe's solicitation - its answer, or another
	// speaker's or a periodic RA that hid whether it was (the long window).
	AnswersMulticast = "multicast"
)

// voice is what a link remembers of how one address speaks.
type voice struct {
	last, lastUnicast, lastMcast time.Time
	// mode: how it answers solicitations (learned, see above).
	mode  string
	probe probe
	// ambiguous: probes in a row that drew both a unicast answer and a
	// multicast RA, or nothing (reprobeAt).
	ambiguous int
}

// unicast reports whether v was learned to answer solicitations unicast.
func (v *voice) unicast() bool { return v.mode == AnswersUnicast }

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
	v := &voice{last: l.voiceFloor, lastMcast: l.voiceFloor, mode: AnswersUnknown}
	// A probe of the last solicitation, unless a gap came after it: the
	// address's multicast answer may be what was lost (FuzzCorroboration
	// 58aabf9aaa6cc13f: a router's answer dropped, a spoofer's unicast word
	// then taught "unicast").
	if !l.asked.IsZero() && !l.voiceFloor.After(l.asked) {
		v.probe = probe{asked: l.asked, end: l.multicastBy(v, l.asked, margin, true)}
	}
	l.voices[r] = v
	return v
}

// heard records a word from r at at, and returns when r spoke last before
// it, and last multicast before it (or may have: voiceFloor).
func (l *link) heard(r netip.Addr, at time.Time, multicast bool, margin time.Duration) (prev, prevMcast time.Time) {
	v := l.voiceOf(r, margin)
	v.conclude(at)
	prev, prevMcast = v.last, later(v.lastMcast, l.voiceFloor)
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
	return prev, prevMcast
}

// conclude learns from the probe whose window ended by now.
func (v *voice) conclude(now time.Time) {
	var open bool
	if v.mode, v.ambiguous, open = v.learnt(now); !open {
		v.probe = probe{}
	}
}

// learnt is what v knows of how its address answers once the probe whose
// window ended by now is concluded, and whether a probe is still open;
// it keeps nothing (a word heard before now may be handled yet).
func (v *voice) learnt(now time.Time) (mode string, ambiguous int, open bool) {
	pr := v.probe
	switch {
	case pr.asked.IsZero():
		return v.mode, v.ambiguous, false
	case now.Before(pr.end):
		return v.mode, v.ambiguous, true
	case pr.multi && pr.uni:
		return AnswersMulticast, v.ambiguous + 1, false
	case pr.multi:
		return AnswersMulticast, v.ambiguous, false
	case pr.uni:
		return AnswersUnicast, 0, false
	}
	// Nothing came: the answer was lost, or not counted (read before the
	// send was reported). It teaches nothing; try again.
	return v.mode, v.ambiguous + 1, false
}

// maxReprobes bounds the solicitations in a row sent only to learn how an
// address answers: an attacker who spoils every probe costs that many, and
// the address waits the multicast bound.
const maxReprobes = 3

// reprobeAt returns when l should solicit again only to learn how an
// address answers (zero: no address needs it): a probe of it drew a unicast
// answer and a multicast RA, or nothing, and a solicitation sent 3 s after
// its last multicast RA has the shortest window.
func (l *link) reprobeAt(now time.Time) time.Time {
	var at time.Time
	for _, v := range l.voices {
		mode, ambiguous, open := v.learnt(now)
		if open || mode == AnswersUnicast || ambiguous == 0 || ambiguous > maxReprobes {
			continue
		}
		t := later(l.asked.Add(SolicitSpacing), v.lastMcast.Add(l.spacing()))
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at
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
		v.probe = probe{asked: at, end: l.multicastBy(v, at, margin, true),
			// Words handled before the report of the send: the times say.
			uni: v.lastUnicast.After(at), multi: !v.lastMcast.Before(at)}
	}
}

// multicastBy is when a router at v's address that multicasts its answers
// has answered a solicitation sent at at, plus margin; with learnt, an
// address learnt to unicast its answers is taken to (no initial phase).
func (l *link) multicastBy(v *voice, at time.Time, margin time.Duration, learnt bool) time.Time {
	m := later(l.firstAsked, l.voiceFloor)
	if m.IsZero() || m.After(at) || l.known.Before(at) {
		// Never solicited before, or RAs that arrived before at may be
		// still unread (reads.go): it may have multicast just now.
		m = at
	}
	if v != nil {
		m = later(m, v.lastMcast)
	}
	by := later(at.Add(MaxRADelay), m.Add(l.spacing()+MaxRADelay))
	if at.Before(m.Add(l.spacing())) && (v == nil || !learnt || !v.unicast()) {
		// It may be rate-limiting its answer, and in its initial phase
		// (radvd) hold it MaxInitialRtrAdvertInterval from the last
		// solicitation that came within MinDelayBetweenRAs of its last
		// multicast RA - an attacker's included.
		by = later(by, m.Add(l.spacing()+MaxInitialRtrAdvertInterval+MaxRADelay))
	}
	return by.Add(margin)
}

// askAgainAt is when a solicitation would put p, a proposal from r already
// asked, to the router with a window ending before p's (zero: none would):
// MinDelayBetweenRAs after the address's last multicast RA (multicastBy),
// when any router answers at once - a spacing after the last solicitation
// at the earliest, and only once the link was read past it (known): RAs
// still unread make the window the long one again (multicastBy), and a
// lagging reader would solicit every spacing for nothing.
func (l *link) askAgainAt(r netip.Addr, p *proposal, known time.Time, margin time.Duration) time.Time {
	v := l.voices[r]
	if v == nil || p.asked.IsZero() || known.Before(l.asked) {
		return time.Time{}
	}
	m := later(later(l.firstAsked, l.voiceFloor), v.lastMcast)
	at := later(l.asked.Add(SolicitSpacing), m.Add(l.spacing()))
	if !at.Add(MaxRADelay + margin).Before(p.soonest()) {
		return time.Time{}
	}
	return at
}

// answerBy is when the router at r has answered a solicitation sent at at,
// plus margin: the window a proposal asked then waits. quiet is the
// address's last multicast RA before the proposal's first word: what was
// learnt of how it answers holds only for a solicitation sent
// MinDelayBetweenRAs or more after it (header).
func (l *link) answerBy(r netip.Addr, at, quiet time.Time, margin time.Duration) time.Time {
	v := l.voices[r]
	if v != nil {
		v.conclude(at)
		if v.unicast() {
			if !at.Before(quiet.Add(l.spacing())) {
				return at.Add(MaxRADelay + margin)
			}
			return l.multicastBy(v, at, margin, false)
		}
		if v.probe.asked.Equal(at) {
			return v.probe.end // reckoned from its last multicast RA before it was asked
		}
	}
	return l.multicastBy(v, at, margin, false)
}

// RouterAnswers returns, for the link, how many router addresses it
// remembers answer solicitations each way (AnswersUnicast, AnswersMulticast,
// AnswersUnknown), counting what every probe whose window passed by now
// teaches (without concluding it: a word heard before now may be handled
// yet), as far as the link was read (reads.go): a multicast RA that arrived
// within a probe's window, still unread, would teach otherwise.
func (s *State) RouterAnswers(name string, now time.Time) map[string]int {
	out := map[string]int{AnswersUnicast: 0, AnswersMulticast: 0, AnswersUnknown: 0}
	if l := s.links[name]; l != nil {
		for _, v := range l.voices {
			mode, _, _ := v.learnt(s.readTo(l, now))
			out[mode]++
		}
	}
	return out
}

// spacing is the routers' MinDelayBetweenRAs on l: RFC 4861's, or the
// user's above it (State.RouterMinDelay).
func (l *link) spacing() time.Duration { return max(l.minDelay, MinDelayBetweenRAs) }

// answerDeadlines passes consider the end of every open probe: what it
// teaches is reported then (RouterAnswers), not at the next word.
func (s *State) answerDeadlines(consider func(deadline)) {
	for _, l := range s.links {
		for _, v := range l.voices {
			if !v.probe.asked.IsZero() {
				consider(deadline(v.probe.end))
			}
		}
	}
}
