// Corroboration: the source address of an RA authenticates nothing (any host on
// the link can take the router's link-local address and MAC), so a change an RA
// makes is believed only when the router says it again after being asked, and
// nothing from its address says otherwise meanwhile. The real router keeps
// advertising and answers a Router Solicitation within a time RFC 4861 6.2.6
// bounds (answer.go fits it to how the router answers); a second speaker on
// its address is then heard to contradict it.
//
// Rules, per link and router address:
//   - A word (one RA, canonical: offer.go) that states nothing other than
//     what the router is believed to offer refreshes it at once.
//   - A word that states anything else - a prefix offered in any state or
//     withdrawn, preferred or deprecated, a lifetime that ends elsewhere, a
//     preferred prefix omitted from the router's whole offer, one prefix
//     listed twice (its last listing counts) - is a proposal. It is put to
//     the router by a solicitation sent after it was first heard (or by the
//     last one, when it is the first word from the address since that one:
//     the router's answer is then this word or still to come). It is
//     believed once a word carrying it came after that solicitation and the
//     router has answered it for sure (answerBy), with no word from the
//     address contradicting it meanwhile; believed, its lifetimes end where
//     the earliest word carrying it said.
//   - Every RA states every prefix its router offers (unless
//     OmitDeprecates is off): one that offers nothing - no prefix option,
//     or withdrawals only - contradicts a word offering a prefix it omits.
//     It deprecates nothing it omits (only an RA offering something is
//     its router's whole offer), but a prefix it omits is no longer
//     re-sent alike: restating it is a proposal (lifetimes.omitted), as
//     after a whole offer that omits it.
//   - Two words from one address that state one prefix differently are a
//     contradiction: the proposal is dropped, the believed offer holds, and
//     the router is in conflict until ConflictHold passes without another.
//     The believed offer is doubted from then on: a word restating it is a
//     proposal too, until one is corroborated. So nothing refreshes it while
//     the two speakers disagree, and a replay of the router's old word holds
//     a real renumbering back no longer than the lifetimes the router stated
//     (nor after the conflict report ends, as a plain refresh would).
//   - The kernel forms SLAAC addresses from any RA, believed or not: a /64
//     address the kernel does not mark permanent (what SLAAC forms, with
//     finite or infinite lifetimes) counts only in a prefix a believed RA
//     offered (vouched) or the agent published before a restart; while a
//     proposal offering it waits, it is neither reported nor rejected.
//     Once no believed RA states the prefix, such an address keeps it
//     reported but never preferred: the kernel refreshes it on any RA's
//     word, a replay of the router's old one included.
//     No table of unbelieved prefixes is needed, so a flood cannot push one
//     out before the kernel's address appears.

package observe

import (
	"cmp"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
)

// DefaultCorroboration is the margin a window adds to the latest a conforming
// router may answer a solicitation (answerBy): for a router that is late, and
// for its answer's trip over the link. Not for the agent's own delays: RAs
// are stamped when the kernel received them and a window is settled only once
// the link is read up to its end (reads.go), so a flood queued ahead of the
// answer or a starved CPU delays the belief, never lets in a contradiction
// read late. (Settled by the clock, 250 ms flaked under make test's load and
// the margin had to be 2.5 s.)
const DefaultCorroboration = 250 * time.Millisecond

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

// proposal is a change one router's RA makes, not yet believed.
type proposal struct {
	word word // the first word carrying it
	// ends: per prefix the earliest ends any word carrying it stated, so
	// what is believed goes no further than the least of them.
	ends  map[netip.Prefix]lifetimes
	at    time.Time // the last word carrying it
	heard time.Time // the first
	asked time.Time // the solicitation put to the router (zero: none yet)
	end   time.Time // when the router has answered it for sure (answerBy)
	// answered: a word carrying it arrived after asked.
	answered bool
	// again, againEnd: a later solicitation whose window ends sooner
	// (answer.go's askAgainAt), and its end; once a word carrying the
	// proposal arrives after it, it is the one the proposal waits for.
	again, againEnd time.Time
	// resend: it re-sends the believed offer alike, later (resends).
	resend bool
	// quiet: its address's last multicast RA before its first word
	// (answerBy: a router may have changed how it answers since).
	quiet time.Time
}

func newProposal(w word) *proposal {
	p := &proposal{word: w, heard: w.at, ends: map[netip.Prefix]lifetimes{}}
	p.take(w)
	return p
}

// take counts a word carrying p.
func (p *proposal) take(w word) {
	p.at = w.at
	for pfx, st := range w.states {
		nl := lifetimes{valid: until(w.at, st.valid), preferred: until(w.at, st.preferred), stated: st, at: w.at}
		if old, ok := p.ends[pfx]; ok {
			nl.valid, nl.preferred = earlier(old.valid, nl.valid), earlier(old.preferred, nl.preferred)
			nl.stated, nl.at = old.stated, old.at
		}
		p.ends[pfx] = nl
	}
}

// soonest is the end of the soonest window p was put to the router with.
func (p *proposal) soonest() time.Time {
	if !p.again.IsZero() && p.againEnd.Before(p.end) {
		return p.againEnd
	}
	return p.end
}

// answer counts a word carrying p at at: the router's answer to each
// solicitation sent before it. The later solicitation's window, ending
// sooner, is then the one p waits for: the router answered it within it
// too, so a contradiction would have come by its end.
func (p *proposal) answer(at time.Time) {
	if !p.asked.IsZero() && at.After(p.asked) {
		p.answered = true
	}
	if !p.again.IsZero() && at.After(p.again) {
		p.asked, p.end, p.answered, p.again = p.again, p.againEnd, true, time.Time{}
	}
}

// offers reports whether p's word offers pfx.
func (p *proposal) offers(pfx netip.Prefix) bool { return p.word.states[pfx].offered() }

// speaker is what corroboration remembers of one router address.
type speaker struct {
	pending       *proposal
	conflictUntil time.Time
}

// changes reports whether w changes anything of what router is believed to
// offer on l at w.at: a prefix offered or withdrawn, preferred or not, a
// lifetime that ends elsewhere; omitted from a whole word, a preferred one.
func (l *link) changes(router netip.Addr, w word) bool {
	for p, st := range w.states {
		e, ok := l.ra[raKey{p, router}]
		if changes(e, ok, st, w.at) {
			return true
		}
	}
	if w.whole {
		for k, e := range l.ra {
			if _, ok := w.states[k.prefix]; !ok && k.router == router && e.statement(w.at).isPreferred() {
				return true
			}
		}
	}
	return false
}

// unsettle takes what w, set aside, would change of router's believed offer
// as no longer re-sent alike.
func (l *link) unsettle(router netip.Addr, w word) {
	for p, st := range w.states {
		if e, ok := l.ra[raKey{p, router}]; ok && e.alike && changes(e, ok, st, w.at) {
			e.alike = false
			l.ra[raKey{p, router}] = e
		}
	}
}

// resends reports whether w states nothing but router's believed offer,
// re-sent with the same lifetimes later: a proposal only because whether the
// router re-sends its lifetimes alike is not yet known.
func (l *link) resends(router netip.Addr, w word) bool {
	for p, st := range w.states {
		e, ok := l.ra[raKey{p, router}]
		if !ok || e.doubted || e.omitted || st != e.stated || e.statement(w.at).isPreferred() != st.isPreferred() {
			return false
		}
	}
	if w.whole {
		for k, e := range l.ra {
			if _, ok := w.states[k.prefix]; !ok && k.router == router && e.statement(w.at).isPreferred() {
				return false
			}
		}
	}
	return true
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
func (s *State) corroborate(name string, router netip.Addr, w word, multicast bool) {
	l := s.fit(s.links[name])
	now := w.at
	l.known = s.readTo(l, now)
	if sp := l.speakers[router]; sp != nil {
		// Its proposal whose window passed is believed before this word counts.
		s.settle(name, l, router, sp, now)
	}
	prev, quiet := l.heard(router, now, multicast, s.Corroboration)
	sp := l.speakerFor(router, now)
	if sp == nil {
		l.crowded++
		return
	}
	if p := sp.pending; p != nil {
		contradicts, carries := compare(p.word, w)
		if _, both := compare(w, p.word); carries && !both {
			// w carries p and states more (p is not a whole offer): w is
			// the proposal now, put to the router afresh - a word before it
			// that carried p may have contradicted w.
			sp.pending = newProposal(w)
			sp.pending.quiet = quiet
			return
		}
		switch {
		case p.resend && !carries:
			// It only re-sent the believed offer (its lifetimes alike, later):
			// dropping it is all safety needs, and a router that renumbers
			// while one waits is no second speaker. Another change that does
			// not contradict it (--keep-omitted-prefixes: no RA states what
			// it omits) takes its place: waiting its turn, a renumbering
			// was held back until the re-send was forgotten (a minute;
			// FuzzCorroboration 871952fa71879a4a).
			sp.pending = nil
		case contradicts:
			sp.conflictUntil = now.Add(s.ConflictHold)
			l.contradictions++
			l.contradicted = true
			sp.pending = nil
			l.doubt(router, now, s.ConflictBound)
		case carries:
			p.take(w)
			p.answer(now)
			return
		case !p.answered && !p.asked.IsZero() && !now.Before(p.soonest()):
			// The router was asked and did not say it by the window's end:
			// another change that contradicts nothing takes its place,
			// silently (--keep-omitted-prefixes: a withdrawal no router
			// word states otherwise held a renumbering back a minute,
			// FuzzCorroboration ca47456b2615a48a). What it would change is
			// no longer re-sent alike: it may be the router's own change,
			// its answer held (a reload to multicast answers), and a replay
			// of its old word must not refresh what it changed
			// (fc395c4c26134717).
			l.unsettle(router, p.word)
			sp.pending = nil
		default:
			// Another change that contradicts nothing (a router splitting its
			// prefixes over several RAs): it waits its turn, and comes again.
			// Meanwhile what it changes is not re-sent alike: a replay of the
			// router's old word refreshed a prefix it had withdrawn
			// (--keep-omitted-prefixes, FuzzCorroboration 3dfc89585e30b2d6).
			l.unsettle(router, w)
			return
		}
	}
	if !l.changes(router, w) {
		s.believe(name, router, w, nil)
		return
	}
	p := newProposal(w)
	p.resend, p.quiet = l.resends(router, w), quiet
	sp.pending = p
	// The first word from the address since the last solicitation: the
	// router's answer to that solicitation is this word or still to come,
	// so that solicitation puts the proposal to the router.
	if a := l.asked; !a.IsZero() && prev.Before(a) && now.After(a) {
		if end := l.answerBy(router, a, p.quiet, s.Corroboration); now.Before(end) {
			p.asked, p.end, p.answered = a, end, true
		}
	}
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
		case p.answered && !s.readTo(l, now).Before(p.end):
			s.believe(name, r, p.word, p.ends)
			sp.pending = nil
		case !p.answered && !now.Before(p.heard.Add(s.ConflictHold)):
			l.unsettle(r, p.word)
			sp.pending = nil // said once, never again: forgotten
		}
	}
	if sp.pending == nil && !now.Before(sp.conflictUntil) {
		delete(l.speakers, r)
	}
}

// Corroborating reports whether a link that has not yet believed an RA has
// a proposal under corroboration (its first RA was heard and is being put to
// its router), or a link has one offering a prefix that awaits its
// restatement after a restart (Restated: a second router's first RA).
func (s *State) Corroborating() bool {
	for _, l := range s.links {
		for _, sp := range l.speakers {
			if p := sp.pending; p != nil && (!l.sawRA || l.restates(p)) {
				return true
			}
		}
	}
	return false
}

// Solicit returns the links that should send a Router Solicitation at now (a
// proposal was heard there since the last one, or a probe of how a router
// answers is to be tried again: answer.go), and when the next one falls
// due (zero: none). Solicitations on a link are at least SolicitSpacing
// apart; a link returned here is not returned again until Solicited reports
// the send, or a spacing later (the send failed).
func (s *State) Solicit(now time.Time) ([]string, time.Time) {
	var due []string
	var next time.Time
	for _, name := range s.Links() {
		l := s.fit(s.links[name])
		// A proposal not yet asked, a probe of how a router answers tried
		// again, a proposal asked again for a shorter window (answer.go).
		known := s.readTo(l, now)
		at := l.reprobeAt(known)
		for r, sp := range l.speakers {
			switch p := sp.pending; {
			case p == nil:
			case p.asked.IsZero():
				at = soonest(at, l.asked.Add(SolicitSpacing))
			default:
				at = soonest(at, l.askAgainAt(r, p, known, s.Corroboration))
			}
		}
		if at.IsZero() {
			continue
		}
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
	s.fit(l)
	l.asked, l.requested = at, time.Time{}
	l.known = s.readTo(l, at)
	l.probeAll(at, s.Corroboration)
	for r, sp := range l.speakers {
		p := sp.pending
		if p == nil || at.Before(p.heard) {
			continue
		}
		end := l.answerBy(r, at, p.quiet, s.Corroboration)
		switch {
		case p.asked.IsZero():
			p.asked, p.end = at, end
		case end.Before(p.soonest()):
			p.again, p.againEnd = at, end
		default:
			continue
		}
		// The answer can be handled before the report of the send: the
		// times say which came first.
		p.answer(p.at)
	}
}

// fit gives l the routers' MinDelayBetweenRAs (RouterMinDelay) for
// answer.go's windows, and returns it.
func (s *State) fit(l *link) *link {
	l.minDelay = s.RouterMinDelay
	return l
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
					consider(deadline(p.end))
				}
				consider(deadline(p.heard.Add(s.ConflictHold)))
			}
			consider(deadline(sp.conflictUntil))
		}
	}
}

// soonest is the earlier of two times, zero meaning none.
func soonest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// earlier is the deadline that passes first.
func earlier(a, b deadline) deadline {
	if a.never() || (!b.never() && time.Time(b).Before(time.Time(a))) {
		return b
	}
	return a
}

// maxRAEntries bounds the (prefix, router) lifetimes one link remembers.
const maxRAEntries = 256

// capRA keeps l.ra within maxRAEntries, whatever the routers (a trusted
// router's address is as easy to take as any other): it forgets first
// what the last digest did not carry, then the entries of untrusted routers,
// of the most junior routers (heard last, or not remembered at all),
// deprecated before preferred.
func (l *link) capRA(pol policy.Policy, now time.Time) {
	if len(l.ra) <= maxRAEntries {
		return
	}
	victims := slices.Collect(maps.Keys(l.ra))
	junior := now.Add(time.Hour) // a router not remembered
	seniority := func(r netip.Addr) time.Time {
		if t, ok := l.since[r]; ok {
			return t
		}
		return junior
	}
	trusted := func(r netip.Addr) bool { return pol.Trusted != nil && pol.Trusts(r) }
	slices.SortFunc(victims, func(a, b raKey) int {
		return cmp.Or(compareBool(l.kept[a.prefix], l.kept[b.prefix]),
			compareBool(trusted(a.router), trusted(b.router)),
			seniority(b.router).Compare(seniority(a.router)),
			compareBool(!l.ra[a].preferred.passed(now), !l.ra[b].preferred.passed(now)),
			a.router.Compare(b.router), a.prefix.Addr().Compare(b.prefix.Addr()))
	})
	for _, k := range victims[:len(l.ra)-maxRAEntries] {
		delete(l.ra, k)
	}
}

// RAEntries returns how many (prefix, router) lifetimes the link remembers
// (at most maxRAEntries once a snapshot has capped them).
func (s *State) RAEntries(name string) int {
	if l := s.links[name]; l != nil {
		return len(l.ra)
	}
	return 0
}

// proposed reports whether a proposal waiting on l offers p.
func (l *link) proposed(p netip.Prefix) bool {
	for _, sp := range l.speakers {
		if sp.pending != nil && sp.pending.offers(p) {
			return true
		}
	}
	return false
}

// doubt marks router's believed offer on l doubted: two speakers on its
// address disagreed, so a word restating it may be a replay of the router's
// old word. Until a word is corroborated nothing refreshes it, and it runs
// out on the lifetimes the router stated before rather than being held for
// ever.
// With bound > 0, a preferred lifetime left runs out no later than bound
// after the offer is first doubted (ConflictBound).
func (l *link) doubt(router netip.Addr, now time.Time, bound time.Duration) {
	for k, e := range l.ra {
		if k.router != router || e.doubted {
			continue
		}
		e.doubted = true
		if bound > 0 && !e.preferred.passed(now) {
			e.preferred = earlier(e.preferred, deadline(now.Add(bound)))
		}
		l.ra[k] = e
	}
}
