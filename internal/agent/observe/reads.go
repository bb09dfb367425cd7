// Reads: a window is settled by what the agent has read, not by its clock.
//
// A window ending at D (a proposal's end: the latest the router answers, plus
// the margin) asks whether any word from the router's address contradicted
// the proposal before D. Words are stamped when the kernel received them, so
// a contradiction that arrived before D counts however late the agent reads
// it - but only once it has been read. Settling at the agent's clock would
// believe a spoofer whenever something delays the reading (a flood queued
// ahead of the router's answer, a starved CPU). So, with AwaitReads, a window
// is settled only when the link is known to be read up to D: a word stamped at
// or after D was read (the socket's queue is in arrival order), or the
// listener found its socket empty at a time at or after D (Read). Until then
// nothing is believed; that is safe, and Behind tells the agent which links
// to ask for a sync and how long they have lagged.

package observe

import "time"

// Read records that the link's listener has handed over every RA that
// arrived before at (it found its socket empty at or after at).
func (s *State) Read(name string, at time.Time) {
	if l := s.links[name]; l != nil {
		l.read = later(l.read, at)
	}
}

// readTo is the time up to which the windows of l may be settled at now:
// now itself unless AwaitReads, else no later than what has been read.
func (s *State) readTo(l *link, now time.Time) time.Time {
	if !s.AwaitReads || l.read.After(now) {
		return now
	}
	return l.read
}

// Lost records that the kernel dropped RAs on the link before at (its
// socket's queue overflowed), or (forget) that the link heard nothing for a
// while (it went down or came up: the router spoke unheard): what they said
// is unknown.
//   - A contradiction of any proposal may be among them, so every proposal
//     waiting is dropped (a router that means it says it again); on a drop its
//     router is reported in conflict for ConflictHold: whoever keeps the
//     queue overflowing holds every change back, and that is not silent.
//   - A multicast RA of any router may be among them, so every address is
//     taken to have multicast at at: a router that multicasts its answers may
//     hold one until 3.5 s after it (multicastBy), however long ago the last
//     multicast RA the agent read.
//   - An answer to a probe may be among them, so no probe of how an address
//     answers concludes on what was left; a probe lost counts as one spoiled
//     (reprobeAt: at most maxReprobes in a row).
func (s *State) Lost(name string, at time.Time) { s.forget(name, at, true) }

// forget is Lost; report says whether a router's mere refresh it forgets
// (its offer re-sent, lifetimes moved on) puts the router in conflict too:
// on a kernel drop yes (whoever overflows the queue holds refreshes back as
// well), on the link going down or up no (radvd re-sends every few seconds,
// and a link flap would write a conflict for a minute). A change forgotten
// always does.
func (s *State) forget(name string, at time.Time, report bool) {
	l := s.links[name]
	if l == nil {
		return
	}
	for r, sp := range l.speakers {
		if p := sp.pending; p != nil && !p.heard.After(at) {
			if report || !p.resend {
				sp.conflictUntil = later(sp.conflictUntil, at.Add(s.ConflictHold))
			}
			sp.pending = nil
		}
		if sp.pending == nil && !at.Before(sp.conflictUntil) {
			delete(l.speakers, r)
		}
	}
	l.voiceFloor = later(l.voiceFloor, at)
	for _, v := range l.voices {
		v.lastMcast = later(v.lastMcast, at)
		if !v.probe.asked.IsZero() {
			v.ambiguous++
		}
		v.probe = probe{}
	}
}

// Behind returns, per link whose window passed by now but cannot be settled
// for want of reads, the earliest such window's end: the agent asks that
// link's listener to sync, and reports a lag that lasts.
func (s *State) Behind(now time.Time) map[string]time.Time {
	if !s.AwaitReads {
		return nil
	}
	var out map[string]time.Time
	for name, l := range s.links {
		for _, sp := range l.speakers {
			p := sp.pending
			if p == nil || !p.answered || now.Before(p.end) || !l.read.Before(p.end) {
				continue
			}
			if out == nil {
				out = map[string]time.Time{}
			}
			if e, ok := out[name]; !ok || p.end.Before(e) {
				out[name] = p.end
			}
		}
	}
	return out
}
