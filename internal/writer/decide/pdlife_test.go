package decide

import (
	"net/netip"
	"time"

	"github.com/renumber/renumber/internal/digest"
)

// The lifetimes pdWorld's server states (issue 42, "One node": a replaced
// delegation's drain is bounded by them). The fuzzer plays a schedule: at any
// step (an op byte of 0xc0 or more: the older scripts never have one, and
// keep their meaning) the server's configured valid lifetime becomes one of
// serverLifetimes - shorter or longer than before, shorter than a pass
// (1 s), or infinite (0xffffffff) - and it may switch between stating that
// lifetime in every answer (ISC dhcpd) and counting down: an Advertise then
// states what is left of the binding, a Reply to a Request or Renew the
// lifetime configured now (RFC 8415 servers: the confirmer's word and the
// client's differ).
type lifetimes struct {
	valid     time.Duration // configured now (infinite: 0xffffffff s)
	countdown bool          // an Advertise states the binding's remaining lifetime
	life      time.Duration // stated to the client that last requested or renewed the binding
	sched     bool          // the script played a schedule step
	// allowed is, per prefix, the lifetime the last honest confirmer's
	// offer read while it was current carried: what the server stated,
	// as the agent can publish it (offer.advertised) - the bound a
	// replaced delegation's drain is held to.
	allowed map[netip.Prefix]time.Duration
}

const infinite = digest.MaxLifetime * time.Second

var serverLifetimes = []time.Duration{time.Second, 20 * time.Second, 2 * time.Minute, pdValid, time.Hour, infinite}

// schedule is one step of the server's lifetime schedule: b picks the
// lifetime configured from now on, and its top bit switches counting down.
func (l *lifetimes) schedule(b byte) {
	l.sched = true
	l.valid = serverLifetimes[int(b&0x7f)%len(serverLifetimes)]
	if b&0x80 != 0 {
		l.countdown = !l.countdown
	}
}

// advertised is the valid lifetime the server states in an Advertise for
// its binding now (server() has just made sure the binding is live).
func (w *pdWorld) advertised() time.Duration {
	if !w.countdown || w.life == infinite {
		return w.valid
	}
	return w.life - w.now.Sub(w.renewed)
}

// liarLifetimes are the lifetimes the liar states for what it holds or is
// offered: the older fixed list, or, once the server's schedule is in play,
// ones around what the server states now - shorter, alike, longer.
func (w *pdWorld) liarLifetimes() []time.Duration {
	if !w.sched {
		return []time.Duration{0, time.Second, pdValid, infinite}
	}
	return []time.Duration{0, time.Second, w.valid / 2, w.valid, min(2*w.valid, infinite), infinite}
}

// offer is an honest confirmer's offer as its agent publishes it
// (internal/agent/pdoffer.go): the longest valid lifetime stated while the
// lifetime's end stays put or moves later (a count-down restates the same
// end) and what is stated now is at least half of it, else the one stated
// now (a shortening, or a count-down past half), until the end last
// stated; past it the offer is left out of the digest.
type offer struct {
	prefix netip.Prefix
	valid  time.Duration
	until  time.Time
}

// countDownSlack is the agent's (servers state whole seconds).
const countDownSlack = 2 * time.Second

// advertised is the offer after the server offered p, stating valid, at now.
func (o offer) advertised(p netip.Prefix, valid time.Duration, now time.Time) offer {
	next := offer{prefix: p, valid: valid, until: now.Add(valid)}
	if o.prefix == p && now.Before(o.until) && !next.until.Before(o.until.Add(-countDownSlack)) && 2*valid >= o.valid {
		next.valid = max(next.valid, o.valid)
	}
	return next
}

// offers is the prefix h's digest carries offered at now (invalid: none, or
// the offer's lifetime ended).
func (h *pdAgent) offers(now time.Time) netip.Prefix {
	if h.offered.IsValid() && h.offer.prefix == h.offered && now.Before(h.offer.until) {
		return h.offered
	}
	return netip.Prefix{}
}
