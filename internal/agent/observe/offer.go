// Offers: what one RA states, canonical, and when two statements say the
// same. Corroboration (corroborate.go) compares every bit of what a word
// states - a prefix offered or not, preferred or not, its lifetimes - with
// what its router is believed to offer, so a forgery need not look like a
// new preferred prefix to be a proposal.

package observe

import (
	"net/netip"
	"time"
)

// LifetimeSlack is how far two statements of one lifetime may differ in
// where they end and still say the same: RAs carry whole seconds, so a
// router that counts its lifetimes down (RFC 9096's old prefix, a
// delegation's remaining lease) states an end that moves by up to a second
// between its RAs.
const LifetimeSlack = 2 * time.Second

// statement is what one word states of one prefix.
type statement struct {
	valid, preferred time.Duration // as on the wire; valid 0 withdraws
}

func (s statement) offered() bool { return s.valid > 0 }

func (s statement) isPreferred() bool { return s.valid > 0 && s.preferred > 0 }

// word is one RA from one router address, canonical.
type word struct {
	at time.Time
	// states: the last listing of each prefix wins, as in the kernel (RFC
	// 4862 5.5.3 processes the options in order): one RA that lists a prefix
	// twice states what its last listing says, and is compared as such.
	states map[netip.Prefix]statement
	// whole: the RA is its router's whole offer, so a prefix it omits is not
	// offered (OmitDeprecates, and the RA offers something).
	whole bool
	// complete: the RA states every prefix its router offers, whatever it
	// offers (OmitDeprecates: an RA that offers nothing, or only withdraws,
	// too), so against another word it states a prefix it omits not
	// offered: a router offering nothing contradicts a spoofer's prefix.
	// Only a whole word deprecates what it omits, though: an RA that offers
	// nothing changes nothing its router was believed to offer before (a
	// home router that lost its ISP prefix leaves it to its lifetimes).
	complete bool
}

func newWord(at time.Time, prefixes []RAPrefix, omitDeprecates bool) word {
	w := word{at: at, states: make(map[netip.Prefix]statement, len(prefixes)), complete: omitDeprecates}
	for _, p := range prefixes {
		pref := min(p.Preferred, p.Valid)
		w.states[p.Prefix.Masked()] = statement{valid: p.Valid, preferred: pref}
		w.whole = w.whole || (omitDeprecates && p.Valid > 0)
	}
	return w
}

// says returns what w states of p, and whether it states anything of it (a
// complete word states every prefix it omits not offered).
func (w word) says(p netip.Prefix) (statement, bool) {
	st, ok := w.states[p]
	return st, ok || w.complete
}

// sameEnd reports whether lifetime a stated at at and b stated at bt say
// the same: re-sent alike, or ending within LifetimeSlack of each other.
func sameEnd(a time.Duration, at time.Time, b time.Duration, bt time.Time) bool {
	if a == b {
		return true
	}
	if a >= Infinite || b >= Infinite {
		return false
	}
	d := at.Add(a).Sub(bt.Add(b))
	return d <= LifetimeSlack && d >= -LifetimeSlack
}

// agree reports whether two statements of one prefix say the same: both not
// offered, or both offered alike (preferred or not, with the same lifetimes;
// a deprecated prefix's preferred lifetime says nothing).
func agree(a statement, at time.Time, b statement, bt time.Time) bool {
	if !a.offered() || !b.offered() {
		return a.offered() == b.offered()
	}
	if a.isPreferred() != b.isPreferred() {
		return false
	}
	return sameEnd(a.valid, at, b.valid, bt) && (!a.isPreferred() || sameEnd(a.preferred, at, b.preferred, bt))
}

// compare reports whether two words from one address contradict each other
// (some prefix both state, stated differently) and whether b carries all
// that a states (every prefix a states, b states alike).
func compare(a, b word) (contradicts, carries bool) {
	carries = true
	check := func(p netip.Prefix) {
		sa, oka := a.says(p)
		sb, okb := b.says(p)
		switch {
		case oka && okb:
			if !agree(sa, a.at, sb, b.at) {
				contradicts = true
			}
		case oka:
			carries = false
		}
	}
	for p := range a.states {
		check(p)
	}
	for p := range b.states {
		if _, ok := a.states[p]; !ok {
			check(p)
		}
	}
	return contradicts, carries && !contradicts
}

// statement is what a believed entry states at now.
func (e lifetimes) statement(now time.Time) statement {
	if e.valid.passed(now) {
		return statement{}
	}
	st := statement{valid: e.valid.remaining(now)}
	if !e.preferred.passed(now) {
		st.preferred = e.preferred.remaining(now)
	}
	return st
}

// changes reports whether w's statement st of a prefix changes the believed
// entry e (absent: ok false) at now.
func changes(e lifetimes, ok bool, st statement, now time.Time) bool {
	if !ok {
		return st.offered()
	}
	if (e.doubted || e.omitted) && st.offered() {
		return true // two speakers, or the router stopped mentioning it: only a corroborated word restates it
	}
	cur := e.statement(now)
	if !cur.offered() || !st.offered() {
		return cur.offered() != st.offered()
	}
	if cur.isPreferred() != st.isPreferred() {
		return true
	}
	if e.alike && st == e.stated {
		return false // re-sent alike: the router states these ends now
	}
	return !agree(cur, now, st, now)
}
