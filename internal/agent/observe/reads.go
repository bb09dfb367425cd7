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
// while (it went down or came up, or its listener reopened its socket: the
// router spoke unheard): what they said is unknown.
//   - A contradiction of any proposal may be among them, so every proposal
//     waiting is dropped (a router that means it says it again); on a drop its
//     router is reported in conflict for ConflictHold: whoever keeps the
//     queue overflowing holds every change back, and that is not silent.
//   - A multicast RA of any router may be among them, so every address is
//     taken to have multicast at at: a router that multicasts its answers may
//     hold one until 3.5 s after it (multicastBy), however long ago the last
//     multicast RA the agent read.
//   - The answer to a solicitation sent before at may be among them, so every
//     address is taken to have spoken at at: a word after it is no answer to
//     that solicitation (a spoofer's would be put to the router by one whose
//     answer went unheard), only to one sent later.
//   - A change of the router's offer may be among them, so a restatement of
//     its believed offer read after them is put to it again (not alike).
//   - An answer to a probe may be among them, so no probe of how an address
//     answers concludes on what was left; a probe lost counts as one spoiled
//     (reprobeAt: at most maxReprobes in a row).
func (s *State) Lost(name string, at time.Time) { s.forget(name, at, reportAll) }

// Reopened records that the link's listener opened a socket at at after
// another closed: RAs that arrived in between were queued nowhere. It forgets
// as Lost does, but reports no router in conflict, not even for a change it
// forgets. A reopen is the agent's own doing (a session it retried, a restart
// it asked for when the link came up or was re-created), no sign of a second
// speaker, and nothing on the link can force one (a message from the link
// ends no session: a bad one is ignored, a flood is dropped and counted); what
// it forgets the router says again at once, since every socket opened
// solicits. Reported, every agent start would have written a conflict: the
// kernel's first listing reports the link up, which restarted the listener
// within a millisecond of its first socket, and the proposal made of the
// router's answer to that socket's solicitation was forgotten in conflict.
func (s *State) Reopened(name string, at time.Time) { s.forget(name, at, reportNone) }

// reporting says which routers forget puts in conflict for a proposal it
// drops.
type reporting int

const (
	// reportAll: every one (a kernel drop: whoever overflows the queue
	// holds a router's mere refresh back as well).
	reportAll reporting = iota
	// reportChanges: a router's change, not its mere refresh (its offer
	// re-sent, lifetimes moved on): the link going down or up (radvd
	// re-sends every few seconds, and a link flap would write a conflict
	// for a minute).
	reportChanges
	// reportNone: none (a reopened socket, Reopened).
	reportNone
)

func (s *State) forget(name string, at time.Time, rep reporting) {
	l := s.links[name]
	if l == nil {
		return
	}
	for r, sp := range l.speakers {
		if p := sp.pending; p != nil && !p.heard.After(at) {
			if rep == reportAll || rep == reportChanges && !p.resend {
				sp.conflictUntil = later(sp.conflictUntil, at.Add(s.ConflictHold))
			}
			sp.pending = nil
		}
		if sp.pending == nil && !at.Before(sp.conflictUntil) {
			delete(l.speakers, r)
		}
	}
	// A router's word after the gap may follow a change it made in the gap
	// (a renumbering forgotten above): a restatement of what it was
	// believed to offer is put to it again, never a plain refresh. Kept
	// alike, a replay of the router's old RA read after each drop of a
	// flood moved the old offer's ends on for as long as the flood lasted,
	// past the lifetimes the router stated and any conflict bound.
	for k, e := range l.ra {
		if e.alike {
			e.alike = false
			l.ra[k] = e
		}
	}
	l.voiceFloor = later(l.voiceFloor, at)
	for _, v := range l.voices {
		v.last = later(v.last, at)
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
