package dhcp6

import (
	"errors"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// An answer is believed only when no other answer to the same transmission
// from the same DUID contradicts it. A DUID authenticates nothing: the client
// multicasts its server's in every Request and Renew, and any host on the
// link can answer first. What a forger cannot do is silence the server, whose
// own answer comes within collectWindow; two answers that disagree under one
// DUID are evidence of a second speaker, and neither is believed.

// collectWindow is how long after the first answer to a transmission the
// client waits for more before it believes any: the first retransmission time
// of a Solicit (RFC 8415 7.6), the time a client gives servers to answer. A
// server on the link answers within milliseconds.
var collectWindow = solicitRT[0]

// agreeWithin is how far apart two answers from one server may put a
// lifetime's end or a timer and still agree: a server that states a
// lifetime afresh for each transmission, or counts down in whole seconds,
// moves them by up to the window and a second of rounding.
var agreeWithin = collectWindow + time.Second

// answer is what one message says of the delegation.
type answer struct {
	server     dhcpv6.DUID
	lease      *Lease // nil: refused (refusal)
	refusal    error  // errNoBinding, or why the message offers nothing
	preference uint8
}

// agrees reports whether a and b say the same: the same refusal, or the same
// prefix with lifetimes and timers ending within agreeWithin of each other,
// and the same Preference.
func (a answer) agrees(b answer) bool {
	if a.preference != b.preference || (a.lease == nil) != (b.lease == nil) {
		return false
	}
	if a.lease == nil {
		return errors.Is(a.refusal, errNoBinding) == errors.Is(b.refusal, errNoBinding) && a.refusal.Error() == b.refusal.Error()
	}
	x, y := a.lease, b.lease
	if x.Prefix != y.Prefix {
		return false
	}
	near := func(d, e time.Duration) bool {
		gap := x.At.Add(d).Sub(y.At.Add(e))
		return -agreeWithin <= gap && gap <= agreeWithin
	}
	return near(x.Preferred, y.Preferred) && near(x.Valid, y.Valid) && near(x.T1, y.T1) && near(x.T2, y.T2)
}

// merge is the lease two agreeing answers support: each lifetime and timer
// ending at the earlier of the two, so nothing outlasts what either said.
func merge(x, y *Lease) *Lease {
	m := *x
	if y.At.Before(m.At) {
		m.At = y.At
	}
	end := func(d, e time.Duration) time.Duration {
		a, b := x.At.Add(d), y.At.Add(e)
		if b.Before(a) {
			a = b
		}
		return a.Sub(m.At)
	}
	m.Preferred, m.Valid, m.T1, m.T2 = end(x.Preferred, y.Preferred), end(x.Valid, y.Valid), end(x.T1, y.T1), end(x.T2, y.T2)
	return &m
}

// heard is what one server said to one transmission.
type heard struct {
	answer
	contradicted bool
}

// tally gathers the answers to one transmission, by server.
type tally struct {
	heard []*heard // in the order first heard
	// crowded: more servers answered than the tally keeps. The one left
	// out may be the real server: nothing heard can be believed.
	crowded bool
}

// maxServers bounds the servers one tally keeps: any host can answer with a
// fresh DUID. (With trustedServers set, only those count at all.)
const maxServers = 16

func (t *tally) add(a answer) {
	for _, h := range t.heard {
		if !h.server.Equal(a.server) {
			continue
		}
		switch {
		case !h.agrees(a):
			h.contradicted = true
		case h.lease != nil:
			h.lease = merge(h.lease, a.lease)
		}
		return
	}
	if len(t.heard) < maxServers {
		t.heard = append(t.heard, &heard{answer: a})
		return
	}
	t.crowded = true
}

// contradicted are the servers whose answers disagreed.
func (t *tally) contradicted() []dhcpv6.DUID {
	var out []dhcpv6.DUID
	for _, h := range t.heard {
		if h.contradicted {
			out = append(out, h.server)
		}
	}
	return out
}

// believed are the answers no other from the same server contradicts.
func (t *tally) believed() []answer {
	var out []answer
	for _, h := range t.heard {
		if !h.contradicted {
			out = append(out, h.answer)
		}
	}
	return out
}

// offerers are the servers that offered a delegation to the transmission,
// or whose answers contradicted each other (the real server may be among
// them). Two of them are two speakers the client cannot tell apart: any
// host can answer under a DUID of its own, with Preference 255, and
// whichever the client took, the other may be the real server. Even
// offering the same prefix they disagree on who binds it: the Request goes
// to one DUID alone, whose Reply may delegate anything.
func (t *tally) offerers() []dhcpv6.DUID {
	var out []dhcpv6.DUID
	for _, h := range t.heard {
		if h.lease != nil || h.contradicted || errors.Is(h.refusal, errNoPrefixAvail) {
			out = append(out, h.server)
		}
	}
	return out
}

// answered reports whether anything was heard under server's DUID.
func (t *tally) answered(server dhcpv6.DUID) bool {
	return slices.ContainsFunc(t.heard, func(h *heard) bool { return h.server.Equal(server) })
}
