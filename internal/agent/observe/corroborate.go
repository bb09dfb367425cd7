// Corroboration: the source address of an RA authenticates nothing (any host on
// the link can take the router's link-local address and MAC), so a change an RA
// makes is believed only when the router says it again after being asked, and
// nothing from its address says otherwise meanwhile. The real router keeps
// advertising and answers a Router Solicitation (RFC 4861 6.2.6: within
// MAX_RA_DELAY_TIME, 0.5 s, or - an answer to all nodes - no sooner than
// MIN_DELAY_BETWEEN_RAS, 3 s, after its last multicast RA); a second speaker
// on its address is then heard to contradict it.
//
// Rules, per link and router address:
//   - A word (one RA) that changes nothing of what the router is believed to
//     offer refreshes its lifetimes at once.
//   - A word that changes something (a new prefix, a preferred one deprecated,
//     withdrawn or - the RA being the router's whole offer - omitted) is a
//     proposal. The link is solicited after the proposal is first heard; the
//     proposal is believed when a word carrying the same changes arrives after
//     that solicitation and Corroboration has passed since it, with no word
//     from the address contradicting it.
//   - Two words from one address that state different things of one prefix
//     (preferred in one, deprecated, withdrawn or omitted in the other) are a
//     contradiction: the proposal is dropped, the last agreed state holds, and
//     the router is in conflict until ConflictHold passes without another.
//   - The kernel forms SLAAC addresses from any RA, believed or not: a /64
//     address the kernel does not mark permanent (what SLAAC forms, with
//     finite or infinite lifetimes) counts only in a prefix a believed RA
//     offered (vouched) or the agent published before a restart.
//     No table of unbelieved prefixes is needed, so a flood cannot push one
//     out before the kernel's address appears.

package observe

import (
	"cmp"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// DefaultCorroboration is how long a router has to contradict a change after
// it was solicited: RFC 4861's MIN_DELAY_BETWEEN_RAS, the longest a router
// that multicasts its answers (radvd does) may hold one back. Half a second
// (MAX_RA_DELAY_TIME) covers only routers that unicast them: against radvd
// a spoofer that spoke twice then won now and then, before the real
// router's delayed answer contradicted it.
const DefaultCorroboration = 3 * time.Second

// SolicitSpacing is the least time between two Router Solicitations on a link.
// Shorter than the window, so a change heard just after a solicitation is put
// to the router soon (the first RA after start is one such).
const SolicitSpacing = time.Second

// DefaultConflictHold is how long a router stays in conflict after the last
// contradiction: long enough that an attacker who pauses does not turn the
// report on and off (each turn is a write).
const DefaultConflictHold = time.Minute

// ErrUncorroborated marks a prefix only the kernel reports, by SLAAC
// addresses, that no believed RA offered: the kernel formed them from an RA
// no router confirmed.
var ErrUncorroborated = errors.New("observe: a SLAAC address in a prefix no believed RA offered")

// Caps on what the LAN can make one link remember: sources and prefixes are
// whatever a host on the link puts in its packets.
const maxSpeakers = maxRouters

// word is what one RA states of each prefix: preferred or not.
type word struct {
	prefixes []RAPrefix
	states   map[netip.Prefix]bool
	// whole: the RA is its router's whole offer, so it states every prefix it
	// omits not preferred (OmitDeprecates, and the RA offers something).
	whole bool
}

func newWord(prefixes []RAPrefix, omitDeprecates bool) word {
	w := word{prefixes: prefixes, states: make(map[netip.Prefix]bool, len(prefixes))}
	for _, p := range prefixes {
		pfx := p.Prefix.Masked()
		// One RA listing a prefix twice: it is preferred if any listing says so.
		w.states[pfx] = w.states[pfx] || (p.Valid > 0 && p.Preferred > 0)
		w.whole = w.whole || (omitDeprecates && p.Valid > 0)
	}
	return w
}

// says returns whether w states p preferred, and whether it states p at all.
func (w word) says(p netip.Prefix) (preferred, stated bool) {
	pref, ok := w.states[p]
	if ok {
		return pref, true
	}
	return false, w.whole
}

// contradicts reports whether two words state different things of one prefix.
func (w word) contradicts(o word) bool {
	for _, set := range []map[netip.Prefix]bool{w.states, o.states} {
		for p := range set {
			a, sa := w.says(p)
			b, sb := o.says(p)
			if sa && sb && a != b {
				return true
			}
		}
	}
	return false
}

// proposal is a change one router's RA makes, not yet believed.
type proposal struct {
	word   word
	claims string    // the changes, canonical: words carrying the same changes agree
	at     time.Time // the last word carrying it
	heard  time.Time // the first
	asked  time.Time // the first solicitation sent after heard (zero: none yet)
	// answered: a word carrying it arrived after asked.
	answered bool
}

// speaker is what corroboration remembers of one router address.
type speaker struct {
	pending       *proposal
	conflictUntil time.Time
}

// believedPreferred reports whether router's believed offer has p preferred at now.
func (l *link) believedPreferred(router netip.Addr, p netip.Prefix, now time.Time) bool {
	e, ok := l.ra[raKey{p, router}]
	return ok && !e.valid.passed(now) && !e.preferred.passed(now)
}

// claims is the canonical list of what w changes of router's believed offer
// ("" when nothing).
func (l *link) claims(router netip.Addr, w word, now time.Time) string {
	changed := map[netip.Prefix]bool{}
	for p, pref := range w.states {
		if pref != l.believedPreferred(router, p, now) {
			changed[p] = pref
		}
	}
	if w.whole {
		for k := range l.ra {
			if _, ok := w.states[k.prefix]; !ok && k.router == router && l.believedPreferred(router, k.prefix, now) {
				changed[k.prefix] = false
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(changed), digest.ComparePrefix)
	var b strings.Builder
	for _, p := range keys {
		b.WriteString(p.String())
		if changed[p] {
			b.WriteString("+ ")
		} else {
			b.WriteString("- ")
		}
	}
	return b.String()
}

// speakerFor returns the corroboration state of router on l, or nil when the
// link remembers maxSpeakers others that matter more (a believed or
// conflicting router is never pushed out by a new one).
func (l *link) speakerFor(router netip.Addr, now time.Time) *speaker {
	if sp := l.speakers[router]; sp != nil {
		return sp
	}
	if len(l.speakers) >= maxSpeakers {
		// Push out the oldest proposal of a router in no conflict.
		var victim netip.Addr
		var oldest time.Time
		for r, sp := range l.speakers {
			if sp.pending == nil || now.Before(sp.conflictUntil) {
				continue
			}
			if !victim.IsValid() || sp.pending.heard.Before(oldest) {
				victim, oldest = r, sp.pending.heard
			}
		}
		if !victim.IsValid() {
			return nil
		}
		delete(l.speakers, victim)
	}
	sp := &speaker{}
	l.speakers[router] = sp
	return sp
}

// corroborate takes one RA's word from router under the rules above.
func (s *State) corroborate(name string, router netip.Addr, now time.Time, prefixes []RAPrefix) {
	l := s.links[name]
	if sp := l.speakers[router]; sp != nil {
		// Its proposal whose window passed is believed before this word counts.
		s.settle(name, l, router, sp, now)
	}
	w := newWord(prefixes, s.OmitDeprecates)
	sp := l.speakerFor(router, now)
	if sp == nil {
		l.crowded++
		return
	}
	claims := l.claims(router, w, now)
	if p := sp.pending; p != nil {
		switch {
		case w.contradicts(p.word):
			sp.conflictUntil = now.Add(s.ConflictHold)
			l.contradictions++
			sp.pending = nil
		case claims == p.claims:
			p.word, p.at = w, now
			if !p.asked.IsZero() && now.After(p.asked) {
				p.answered = true
			}
			return
		default:
			// Another change that contradicts nothing (a router splitting its
			// prefixes over several RAs): it waits its turn, and comes again.
			return
		}
	}
	if claims == "" {
		s.believe(name, router, now, prefixes)
		return
	}
	sp.pending = &proposal{word: w, claims: claims, at: now, heard: now}
}

// Settle believes every answered proposal whose window passed by now, and
// forgets proposals nobody answered and conflicts that ran out. Snapshot
// settles first; the agent settles before it asks SawRA.
func (s *State) Settle(now time.Time) {
	for name, l := range s.links {
		for r, sp := range l.speakers {
			s.settle(name, l, r, sp, now)
		}
	}
}

// settle is Settle for one router on one link.
func (s *State) settle(name string, l *link, r netip.Addr, sp *speaker, now time.Time) {
	if p := sp.pending; p != nil {
		switch {
		case p.answered && !now.Before(p.asked.Add(s.Corroboration)):
			s.believe(name, r, p.at, p.word.prefixes)
			sp.pending = nil
		case !p.answered && !now.Before(p.heard.Add(s.ConflictHold)):
			sp.pending = nil // said once, never again: forgotten
		}
	}
	if sp.pending == nil && !now.Before(sp.conflictUntil) {
		delete(l.speakers, r)
	}
}

// Corroborating reports whether a link that has not yet believed an RA has
// a proposal under corroboration: its first RA was heard and is being put to
// its router.
func (s *State) Corroborating() bool {
	for _, l := range s.links {
		if l.sawRA {
			continue
		}
		for _, sp := range l.speakers {
			if sp.pending != nil {
				return true
			}
		}
	}
	return false
}

// Solicit returns the links that should send a Router Solicitation at now (a
// proposal was heard there since the last one), and when the next one falls
// due (zero: none). Solicitations on a link are at least SolicitSpacing
// apart; a link returned here is not returned again until Solicited reports
// the send, or a spacing later (the send failed).
func (s *State) Solicit(now time.Time) ([]string, time.Time) {
	var due []string
	var next time.Time
	for _, name := range s.Links() {
		l := s.links[name]
		waiting := false
		for _, sp := range l.speakers {
			if sp.pending != nil && sp.pending.asked.IsZero() {
				waiting = true
				break
			}
		}
		if !waiting {
			continue
		}
		at := l.asked.Add(SolicitSpacing)
		if !l.requested.IsZero() {
			at = later(at, l.requested.Add(SolicitSpacing))
		}
		if now.Before(at) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		l.requested = now
		due = append(due, name)
	}
	return due, next
}

// Solicited records that a Router Solicitation went out on the link at at:
// every proposal heard before it has now been put to the router.
func (s *State) Solicited(name string, at time.Time) {
	l := s.links[name]
	if l == nil {
		return
	}
	l.asked, l.requested = at, time.Time{}
	for _, sp := range l.speakers {
		if p := sp.pending; p != nil && p.asked.IsZero() && !at.Before(p.heard) {
			p.asked = at
			// The answer can be handled before the report of the send: the
			// times say which came first.
			p.answered = p.at.After(at)
		}
	}
}

// Conflicts returns the routers whose address contradicted itself on the
// link within ConflictHold of now, sorted.
func (s *State) Conflicts(name string, now time.Time) []netip.Addr {
	l := s.links[name]
	if l == nil {
		return nil
	}
	var out []netip.Addr
	for r, sp := range l.speakers {
		if now.Before(sp.conflictUntil) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// TakeCounts returns, and starts counting anew, the contradictions heard on
// the link and the words of routers not remembered because maxSpeakers
// others were (crowded), since the last call.
func (s *State) TakeCounts(name string) (contradictions, crowded uint64) {
	l := s.links[name]
	if l == nil {
		return 0, 0
	}
	contradictions, crowded = l.contradictions, l.crowded
	l.contradictions, l.crowded = 0, 0
	return contradictions, crowded
}

// corroborationDeadlines passes consider every time at which settle could
// change something.
func (s *State) corroborationDeadlines(consider func(deadline)) {
	for _, l := range s.links {
		for _, sp := range l.speakers {
			if p := sp.pending; p != nil {
				if p.answered {
					consider(deadline(p.asked.Add(s.Corroboration)))
				}
				consider(deadline(p.heard.Add(s.ConflictHold)))
			}
			consider(deadline(sp.conflictUntil))
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// maxRAEntries bounds the (prefix, router) lifetimes one link remembers.
const maxRAEntries = 256

// capRA keeps l.ra within maxRAEntries: it forgets first the entries of the
// most junior routers (heard last, or not remembered at all), deprecated
// before preferred, and never an entry of a trusted router or of a prefix the
// last digest carried.
func (l *link) capRA(pol policy.Policy, now time.Time) {
	if len(l.ra) <= maxRAEntries {
		return
	}
	var victims []raKey
	for k := range l.ra {
		if (pol.Trusted != nil && pol.Trusts(k.router)) || l.kept[k.prefix] {
			continue
		}
		victims = append(victims, k)
	}
	junior := now.Add(time.Hour) // a router not remembered
	seniority := func(r netip.Addr) time.Time {
		if t, ok := l.since[r]; ok {
			return t
		}
		return junior
	}
	slices.SortFunc(victims, func(a, b raKey) int {
		return cmp.Or(seniority(b.router).Compare(seniority(a.router)),
			compareBool(!l.ra[a].preferred.passed(now), !l.ra[b].preferred.passed(now)),
			a.router.Compare(b.router), a.prefix.Addr().Compare(b.prefix.Addr()))
	})
	for _, k := range victims[:min(len(victims), len(l.ra)-maxRAEntries)] {
		delete(l.ra, k)
	}
}
