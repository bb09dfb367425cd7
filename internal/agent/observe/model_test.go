package observe

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// The model: one link, one conforming router at routerA and the LAN
// adversary on the same address, against a deterministic clock.
//
// The router (RFC 4861 6.2.6) answers a solicitation unicast within
// MaxRADelay, or - multicasting its answers - within MaxRADelay but no
// sooner than MinDelayBetweenRAs after its last multicast RA; it multicasts
// its offer every interval; it renumbers when the fuzzer says, advertising
// the old prefix deprecated or omitting it. The fuzzer chooses every delay
// within those bounds. A renumbering is a reload, and a multicasting router
// then does what radvd 2.19 does in its initial phase (its first
// maxInitialRAs RAs): its RAs come at most MaxInitialRtrAdvertInterval
// apart, and a rate-limited answer (a solicitation, the agent's or the
// adversary's, within MinDelayBetweenRAs of its last multicast RA) is held
// min(MaxInitialRtrAdvertInterval, interval) from that solicitation.
//
// The agent reads what arrives in arrival order, each word stamped when it
// arrived, but late: the fuzzer chooses each word's reading delay, up to
// maxReadDelay (a flood queued ahead of it, a starved CPU). The listener
// reports the link read up to now whenever nothing arrived is left unread.
//
// The adversary may send, at any time the fuzzer chooses, any RA from the
// router's address (multicast or unicast, any prefixes, states, lifetimes,
// one prefix listed twice), replay any RA the router sent, answer every
// solicitation of the agent's at once with a unicast copy of the router's
// offer (so a multicasting router seems to unicast its answers), or solicit
// the router itself. It cannot silence the router.
//
// Not the adversary's doing, the fuzzer may also close the listener's socket
// and open another after a gap (a session failed and retried, a restart):
// what the old socket queued unread is lost with it, what arrives in the gap
// is queued nowhere, the new socket reports the gap (Reopened) and solicits.
// A renumbering then lands within landing of the reopen. A contradiction is
// not owed as a conflict if the gap may have forgotten it, nor if spoken
// within landing of the reopen: the agent, having forgotten what was
// pending, may hold nothing the word contradicts until the router speaks
// again (a withdrawal of a prefix not yet believed changes nothing). The
// user may drop the router from trustedRouters (the link then trusts an
// address never heard) and name it again: while dropped, the agent hears
// nothing, and no renumbering or conflict is owed for that while; once
// named again its words are heard afresh, as a new router's, and a
// contradiction is owed as after a reopen.
//
// After every step: safety - no word of a router the link does not trust
// is believed; a router that multicasts its answers is never
// taken for one that unicasts them (its window would end before its
// answer), and everything believed of the router's address is
// something the router stated, its lifetimes ending no later than the
// router's own statements of it (LifetimeSlack), whatever the reading delays;
// liveness - a renumbering no adversary word follows is believed within the
// router's answer delay plus the window (plus the reading delays, landing),
// and an adversary word contradicting the router's offer is reported as a
// conflict within the same time.
//
// The kernel's SLAAC addresses (formed from every RA that reaches the host),
// agent restarts, and the check of the digest itself: kernel_model_test.go.
// A second router, on the same link or another, and --conflict-bound:
// routers_model_test.go (FuzzTwoRouters).

var modelPrefixes = []netip.Prefix{pA, pB, netip.MustParsePrefix("2001:db8:c::/64"), netip.MustParsePrefix("2001:db8:d::/64"), pX, netip.MustParsePrefix("2001:db8:bad:1::/64")}

var modelLifetimes = []time.Duration{0, time.Second, 30 * time.Second, 30 * time.Minute, time.Hour, 24 * time.Hour, Infinite}

// routerOffer is one offer the router makes, and when it stated it.
type routerOffer struct {
	prefixes []RAPrefix
	first    time.Time // first sent (zero: not yet)
	until    time.Time // the next offer first sent (zero: current)
}

type modelRouter struct {
	// addr, link: its link-local address and the link it advertises on.
	addr     netip.Addr
	link     string
	unicast  bool
	interval time.Duration
	// minDelay: its MinDelayBetweenRAs (RFC 4861's 3 s, or radvd's option
	// above it; the agent is told it, as the user would: RouterMinDelay).
	minDelay time.Duration
	// wasUnicast: it unicast its answers at some time (a reload may have
	// changed how it answers).
	wasUnicast bool
	offers     []*routerOffer
	sent       [][]RAPrefix // every RA it sent, for replays
	// unheard: how many of sent went out before the agent listened.
	unheard int
	// lastMcast, nextPeriodic, answerAt: its RFC 4861 timers.
	lastMcast, nextPeriodic, answerAt time.Time
	answerMcast                       bool
	// initial: the RAs left of its initial phase (after a reload).
	initial int
	// land: its renumbering to check at land (zero: none); conflictBy: a
	// contradiction of its offer to be reported by then.
	land, conflictBy time.Time
	// pool: the prefixes it renumbers onto, in turn; spokenAt: when the
	// adversary last spoke from its address; resaid: its first RA since
	// (zero: none yet).
	pool             []netip.Prefix
	spokenAt, resaid time.Time
	// npt: it advertises its global prefix deprecated beside a preferred
	// ULA (nptOffer).
	npt bool
}

// maxInitialRAs is RFC 4861's MAX_INITIAL_RTR_ADVERTISEMENTS.
const maxInitialRAs = 3

func (r *modelRouter) current() *routerOffer { return r.offers[len(r.offers)-1] }

// stating is the offer the router last advertised.
func (r *modelRouter) stating() *routerOffer {
	for i := len(r.offers) - 1; i > 0; i-- {
		if !r.offers[i].first.IsZero() {
			return r.offers[i]
		}
	}
	return r.offers[0]
}

// maxReadDelay bounds how late the model's agent reads a word.
const maxReadDelay = 4 * time.Second

// landing is the latest a renumbering first sent at sent lands, no adversary
// speaking: its word read, a solicitation within SolicitSpacing, the
// router's answer, the window's margin, and the link read up to the window's
// end (the last word before it read, or one after it).
// The router's answer and the window may be the initial phase's (answer.go:
// any address not learnt to unicast its answers waits for it, and a
// unicasting router's probes may be spoiled by its periodic RAs).
// With --keep-omitted-prefixes a change that neither carries nor
// contradicts the one waiting from its address (a router splitting its
// offer) waits its turn: a renumbering read while the router's previous
// word waits lands within twice that.
func (m *model) landing() time.Duration {
	d := SolicitSpacing + m.r.minDelay + MaxInitialRtrAdvertInterval + MaxRADelay + DefaultCorroboration + 3*maxReadDelay + time.Millisecond
	if m.keepOmitted {
		d *= 2
	}
	return d
}

// arrival is a word the agent has yet to read.
type arrival struct {
	from       *modelRouter // the router whose address it came from
	at, readAt time.Time
	prefixes   []RAPrefix
	multicast  bool
}

type model struct {
	t      testing.TB
	s      *State
	now    time.Time
	r      *modelRouter
	input  []byte
	jitter int
	// unread: the words arrived and not yet read, in arrival order.
	unread []arrival
	// lastAdversary: when the adversary last spoke.
	lastAdversary time.Time
	// echo: the adversary answers the agent's solicitations at once, unicast,
	// with a copy of the router's offer or (echoOwn) of its own last word,
	// said.
	echo, echoOwn bool
	said          []RAPrefix
	// gap: no socket is open until then (zero: one is); reopened: when one
	// last opened after a gap.
	gap, reopened time.Time
	// drop: how many of the next words to arrive the kernel drops (its
	// socket's queue full: a flood); lostAt: the last one dropped and not
	// yet reported (zero: none) - reported with the first word read that
	// arrived after it, or when the listener finds its socket empty.
	drop   int
	lostAt time.Time
	// droppedAt: when a word was last dropped.
	droppedAt time.Time
	// rearm: a word was dropped while a renumbering was to land; it lands
	// within landing of the router's next word queued.
	rearm bool
	// down: the agent is down until gap ends (goDown), and restarts then.
	down bool
	// distrusted: the user dropped the router from trustedRouters (the
	// link trusts another address, never heard); the agent hears nothing.
	distrusted bool
	// keepOmitted: the agent runs with --keep-omitted-prefixes.
	keepOmitted bool
	steps       int
	// b: the second router (nil: none); as, replayed: whose address the
	// adversary's move speaks from, whose RA it replays; prefixes: the
	// prefixes it speaks of; doubts: the contradictions counted
	// (routers_model_test.go).
	b            *modelRouter
	as, replayed *modelRouter
	prefixes     []netip.Prefix
	doubts       map[doubtKey]*doubtTimes
	counted      contradictions
	lostTimes    map[time.Time]bool
	// restartMemory: when the memory the last restart put back was written.
	restartMemory time.Time
	// follow: the links follow a deprecated prefix (FollowDeprecated).
	follow bool
	// kernel: the kernel's SLAAC addresses (kernel_model_test.go).
	kernel map[netip.Prefix]kernelAddr
	// published: the digest on the Node; restarted: the agent restarted;
	// seededPreferred: the prefixes its last restart seeded preferred, and
	// until when the kernel's address in each was preferred then.
	published digest.Node
	restarted bool
	// memory: what the agent last wrote to its state file (memory.go).
	memory          Memory
	seededPreferred map[netip.Prefix]deadline
	// shadow: the agent that did not restart, while the world has been
	// quiet since before the restart at restartAt; lastMove: the world's
	// last move (quietrestart_test.go).
	shadow              *State
	lastMove, restartAt time.Time
	// memoryStuck: the agent's memory writes fail (a full or read-only
	// /var): the file keeps the memory last written. restartedAt: the last
	// restart; deprecatedBefore: what the digest carried deprecated then.
	memoryStuck      bool
	restartedAt      time.Time
	deprecatedBefore map[linkPrefix]bool
}

// next returns the fuzzer's next choice (0 once the input runs out).
func (m *model) next() byte {
	if len(m.input) == 0 {
		return 0
	}
	b := m.input[0]
	m.input = m.input[1:]
	return b
}

// delay is a random delay in [1ms, MaxRADelay] the fuzzer chooses (an
// answer takes some time on the wire).
func (m *model) delay() time.Duration {
	m.jitter++
	var b byte
	if len(m.input) > 0 {
		b = m.input[m.jitter%len(m.input)]
	}
	return time.Millisecond + (MaxRADelay-time.Millisecond)*time.Duration(b)/255
}

// arrive queues a word arriving at now; the agent reads it after a delay in
// [0, maxReadDelay] the fuzzer chooses, and after every word before it.
func (m *model) arrive(from *modelRouter, prefixes []RAPrefix, multicast bool) bool {
	if m.now.Before(m.gap) {
		m.tracef("no socket: the word is queued nowhere")
		return false
	}
	if m.drop > 0 {
		m.drop--
		m.lostAt, m.droppedAt = m.now, m.now
		m.tracef("the kernel drops the word")
		if from == m.r {
			m.rearm = !m.r.land.IsZero() // the router says it again, at its next word
		}
		return false
	}
	m.jitter++
	var b byte
	if len(m.input) > 0 {
		b = m.input[(m.jitter*7)%len(m.input)]
	}
	readAt := m.now.Add(maxReadDelay * time.Duration(b) / 255)
	if n := len(m.unread); n > 0 {
		readAt = later(readAt, m.unread[n-1].readAt)
	}
	m.unread = append(m.unread, arrival{from: from, at: m.now, readAt: readAt, prefixes: prefixes, multicast: multicast})
	return true
}

// lost reports the drops not yet reported, at at.
func (m *model) lost(at time.Time) {
	m.tracef("agent learns of drops, at +%s", at.Sub(t0))
	if m.lostTimes == nil {
		m.lostTimes = map[time.Time]bool{}
	}
	m.lostTimes[at] = true
	for _, name := range m.links() {
		m.both(func(s *State) { s.Lost(name, at) })
	}
	m.lostAt = time.Time{}
}

// read hands the agent every word whose reading time came, stamped when it
// arrived; with nothing left unread, the link is read up to now.
func (m *model) read() {
	if m.now.Before(m.gap) {
		return // no socket: nothing is read, nor reported read
	}
	for len(m.unread) > 0 && !m.unread[0].readAt.After(m.now) {
		a := m.unread[0]
		m.unread = m.unread[1:]
		if !m.lostAt.IsZero() && !a.at.Before(m.lostAt) {
			m.lost(a.at) // the kernel's count of drops comes with it
		}
		m.tracef("agent reads the word of +%s %v multicast=%v", a.at.Sub(t0), a.prefixes, a.multicast)
		m.both(func(s *State) { s.Heard(a.from.link, a.from.addr, a.at, a.prefixes, a.multicast) })
	}
	if len(m.unread) == 0 && !m.lostAt.IsZero() {
		m.lost(m.now) // the socket's count of drops, read on a sync
	}
	// Each link has its own socket: one with nothing left unread is read
	// up to now, whatever the other link's queue holds (unless a drop, on
	// either link in the model, is yet to be reported).
	for _, name := range m.links() {
		if m.lostAt.IsZero() && !slices.ContainsFunc(m.unread, func(a arrival) bool { return a.from.link == name }) {
			m.both(func(s *State) { s.Read(name, m.now) })
		}
	}
}

// trace logs the model's events (MODEL_TRACE=1, to read a failure).
var trace = os.Getenv("MODEL_TRACE") != ""

func (m *model) tracef(format string, args ...any) {
	if trace {
		m.t.Logf("+%s "+format, append([]any{m.now.Sub(t0)}, args...)...)
	}
}

func (m *model) send(r *modelRouter, prefixes []RAPrefix, multicast bool) {
	m.tracef("router %s says %v multicast=%v", r.addr, prefixes, multicast)
	cur := r.current()
	if cur.first.IsZero() {
		cur.first = m.now
		if len(r.offers) > 1 {
			r.offers[len(r.offers)-2].until = m.now
			r.land = m.now.Add(m.landing())
		}
	}
	r.sent = append(r.sent, prefixes)
	if r.resaid.IsZero() {
		r.resaid = m.now
	}
	m.kernelHears(r.link, prefixes)
	defer func() {
		if r == m.r && m.rearm && !m.r.land.IsZero() && len(m.unread) > 0 && m.unread[len(m.unread)-1].at.Equal(m.now) {
			m.r.land, m.rearm = later(m.r.land, m.now.Add(m.landing())), false
		}
	}()
	if multicast {
		r.lastMcast = m.now
		r.nextPeriodic = m.now.Add(r.interval)
		if r.initial > 0 {
			r.initial--
		}
		if r.initial > 0 {
			r.nextPeriodic = m.now.Add(min(r.interval, MaxInitialRtrAdvertInterval))
		}
		if r.answerMcast {
			r.answerAt = time.Time{} // this one answers
		}
	}
	m.arrive(r, prefixes, multicast)
}

// solicited: the router hears a solicitation at now.
func (m *model) solicited(r *modelRouter) {
	d := m.delay()
	if r.unicast {
		if r.answerAt.IsZero() {
			r.answerAt, r.answerMcast = m.now.Add(d), false
		}
		m.tracef("router will answer at +%s", r.answerAt.Sub(t0))
		return
	}
	limited := !r.lastMcast.IsZero() && m.now.Sub(r.lastMcast) < r.minDelay
	if limited && r.initial > 0 {
		// radvd's reschedule_iface: its one timer, set from now.
		r.answerAt, r.answerMcast = m.now.Add(min(r.interval, MaxInitialRtrAdvertInterval)), true
		r.nextPeriodic = r.answerAt
		m.tracef("router (initial phase) will answer at +%s", r.answerAt.Sub(t0))
		return
	}
	if !r.answerAt.IsZero() && (limited || !r.answerAt.After(m.now.Add(d))) {
		// One multicast answer serves every solicitation before it; not
		// rate-limited, radvd answers at once even if an initial phase's
		// answer is held.
		return
	}
	at := m.now.Add(d)
	if limited {
		at = r.lastMcast.Add(r.minDelay + d)
	}
	if r.nextPeriodic.Before(at) {
		at = r.nextPeriodic
	}
	r.answerAt, r.answerMcast = at, true
	m.tracef("router will answer at +%s", r.answerAt.Sub(t0))
}

// runUntil runs the router and the agent up to t.
func (m *model) runUntil(t time.Time) {
	stuck := 0
	for {
		if stuck++; stuck > 10000 {
			m.fail("the model is stuck")
		}
		var at time.Time
		for i, r := range m.routers() {
			if i == 0 || r.nextPeriodic.Before(at) {
				at = r.nextPeriodic
			}
			if !r.answerAt.IsZero() && r.answerAt.Before(at) {
				at = r.answerAt
			}
		}
		solicitAt := m.solicit()
		var readAt time.Time
		if len(m.unread) > 0 {
			readAt = m.unread[0].readAt
		}
		lands := []time.Time{solicitAt, readAt, m.gap}
		for _, r := range m.routers() {
			lands = append(lands, r.land, r.conflictBy)
		}
		for _, c := range lands {
			if !c.IsZero() && c.After(m.now) && c.Before(at) {
				at = c
			}
		}
		if d, ok := m.s.NextDeadline(m.now); ok && d.Before(at) {
			at = d
		}
		if at.After(t) {
			break
		}
		if at.After(m.now) {
			stuck = 0
		}
		m.now = later(m.now, at)
		m.reopenDue()
		for _, r := range m.routers() {
			switch {
			case !r.answerAt.IsZero() && !r.answerAt.After(m.now):
				mc := r.answerMcast
				r.answerAt = time.Time{}
				m.send(r, r.current().prefixes, mc)
			case !r.nextPeriodic.After(m.now):
				m.send(r, r.current().prefixes, true)
			}
		}
		m.agent()
	}
	m.now = later(m.now, t)
	m.agent()
}

// solicit sends the solicitation due at now, if any, and returns when the
// next one is.
func (m *model) solicit() time.Time {
	if m.now.Before(m.gap) {
		return time.Time{} // no socket: the next one solicits as it opens
	}
	due, next := m.s.Solicit(m.now)
	for _, name := range due {
		m.tracef("agent solicits on %s", name)
		m.sendSolicitation(name)
	}
	return next
}

// sendSolicitation: the listener's solicitation goes out at now, and is
// reported; the router hears it, and the adversary answers it if it does.
func (m *model) sendSolicitation(name string) {
	m.both(func(s *State) { s.Solicited(name, m.now) })
	for _, r := range m.routers() {
		if r.link == name {
			m.solicited(r)
		}
	}
	if m.echo && name == m.r.link {
		m.now = m.now.Add(time.Nanosecond) // after the solicitation, never before the model's clock
		m.tracef("adversary answers at once")
		m.lastAdversary = m.now
		ps := m.r.stating().prefixes
		if m.echoOwn {
			ps = m.said
		}
		m.kernelHears(m.r.link, ps)
		// Queued behind what arrived before it: handed over at once, it
		// was read before words that came earlier, which no listener does.
		m.arrive(m.r, ps, false)
		m.read()
	}
}

// closeSocket: the listener's socket closes for gap; what it queued unread
// is lost with it.
func (m *model) closeSocket(gap time.Duration) {
	m.tracef("listener closes its socket for %s, %d words unread", gap, len(m.unread))
	m.unread, m.lostAt, m.drop = nil, time.Time{}, 0
	m.gap = m.now.Add(gap)
	m.forgetConflicts()
}

// reopenDue opens the socket whose gap ended by now.
func (m *model) reopenDue() {
	switch {
	case m.gap.IsZero() || m.now.Before(m.gap):
	case m.down:
		m.down = false
		m.restart()
	default:
		m.reopen()
	}
}

// reopen: at the gap's end a socket opens, reports the gap and solicits.
func (m *model) reopen() {
	m.gap, m.reopened = time.Time{}, m.now
	m.tracef("listener reopens its socket")
	for _, name := range m.links() {
		m.s.Reopened(name, m.now)
	}
	m.now = m.now.Add(time.Nanosecond) // the solicitation goes out after the socket opened
	for _, name := range m.links() {
		m.sendSolicitation(name)
	}
	m.postpone()
}

// agent does what the agent's loop does at now, then checks.
func (m *model) agent() {
	m.reopenDue()
	m.read()
	m.solicit()
	n, _ := m.s.Snapshot(m.now)
	m.check()
	m.checkDigest(n)
	m.checkQuietRestart(n)
}

// check asserts safety and liveness at now.
func (m *model) check() {
	m.steps++
	for _, r := range m.routers() {
		l := m.s.links[r.link]
		if v := l.voices[r.addr]; v != nil && !r.wasUnicast {
			if mode, _, _ := v.learnt(m.s.readTo(l, m.now)); mode == AnswersUnicast {
				m.fail("takes the router %s, which multicasts its answers, for one that unicasts them", r.addr)
			}
		}
	}
	for _, name := range m.links() {
		m.checkLink(name)
	}
	m.checkBound()
	l := m.s.links["eth0"]
	if m.distrusted {
		// Nothing the router says is heard: no renumbering lands, no
		// contradiction is reported (nor owed once it is trusted again:
		// its words are heard afresh, as a new router's).
		m.r.land, m.r.conflictBy = time.Time{}, time.Time{}
	}
	if !m.r.land.IsZero() && !m.rearm && !m.now.Before(m.r.land) && !m.down {
		if m.lastAdversary.Before(m.r.land.Add(-m.landing())) {
			m.landed(m.r, l)
		}
		m.r.land = time.Time{}
	}
	m.checkSecondLands()
	for _, r := range m.routers() {
		switch {
		case r.conflictBy.IsZero():
		case slices.Contains(m.s.Conflicts(r.link, m.now), r.addr):
			r.conflictBy = time.Time{}
		case !m.now.Before(r.conflictBy):
			m.fail("an adversary word contradicting the router %s was not reported as a conflict", r.addr)
		}
	}
}

// checkLink asserts safety on one link at now: every word believed is of
// a router the link trusts, and everything believed of a router's address
// is something that router stated.
func (m *model) checkLink(name string) {
	l := m.s.links[name]
	for k, e := range l.ra {
		if !m.s.policies[name].Trusts(k.router) {
			m.fail("believes %s's word of %s on %s, a router the link does not trust", k.router, k.prefix, name)
		}
		r := m.router(name, k.router)
		if r == nil {
			m.fail("believes %s's word of %s on %s, where no router has that address", k.router, k.prefix, name)
		}
		if m.keepOmitted && (!r.stating().states(k.prefix) || !r.statingAt(e.at).offersPrefix(k.prefix) || r.omittedSince(k.prefix, e.at)) {
			// Open (docs/security.md): with --keep-omitted-prefixes no RA
			// is its router's whole offer, so a prefix a spoofer adds, or
			// restates when the router no longer mentions it, is as a
			// router splitting its offer over several RAs would say it
			// (and stays so until the router's word of it is corroborated:
			// set when the router did not offer it, or stopped since).
			continue
		}
		validBy, prefBy, stated, statedPreferred, infinite := r.statements(k.prefix, m.now)
		switch {
		case !stated:
			m.fail("believes %s of %s, which the router never offered", k.prefix, r.addr)
		case e.valid.never() && !infinite, !e.valid.never() && time.Time(e.valid).After(validBy.Add(LifetimeSlack)):
			m.fail("believes %s of %s valid until %v, the router stated it until %s at most", k.prefix, r.addr, m.at(e.valid), validBy.Sub(t0))
		case !e.preferred.passed(m.now) && !statedPreferred:
			m.fail("believes %s of %s preferred, which the router never stated", k.prefix, r.addr)
		case !e.preferred.passed(m.now) && (e.preferred.never() || time.Time(e.preferred).After(prefBy.Add(LifetimeSlack))):
			m.fail("believes %s of %s preferred until %v, the router stated it until %s at most", k.prefix, r.addr, m.at(e.preferred), prefBy.Sub(t0))
		}
	}
}

// statements is what the router at routerA stated of p (statements).
func (m *model) statements(p netip.Prefix) (validBy, prefBy time.Time, stated, statedPreferred, infinite bool) {
	return m.r.statements(p, m.now)
}

// statements is what the router's offers stated of p, up to now: the
// latest its valid and preferred lifetimes end, whether any offered it,
// any stated it preferred, any stated an infinite valid lifetime.
func (r *modelRouter) statements(p netip.Prefix, now time.Time) (validBy, prefBy time.Time, stated, statedPreferred, infinite bool) {
	for _, o := range r.offers {
		if o.first.IsZero() {
			continue
		}
		to := now
		if !o.until.IsZero() {
			to = o.until
		}
		for _, q := range o.prefixes {
			if q.Prefix != p || q.Valid == 0 {
				continue
			}
			stated = true
			infinite = infinite || q.Valid >= Infinite
			validBy = later(validBy, to.Add(q.Valid))
			if q.Preferred > 0 {
				statedPreferred = true
				prefBy = later(prefBy, to.Add(q.Preferred))
			}
		}
	}
	return validBy, prefBy, stated, statedPreferred, infinite
}

// landed checks a renumbering no adversary word followed: what the router
// states preferred is believed preferred, what it states deprecated or
// withdraws is not, and what it omits is not either where its RA is its
// whole offer (it offers something, and the agent deprecates on omission).
// An RA that offers nothing says nothing of a prefix it omits.
func (m *model) landed(r *modelRouter, l *link) {
	o := r.stating()
	var want, got []netip.Prefix
	whole := !m.keepOmitted && o.offers()
	for k, e := range l.ra {
		if k.router != r.addr || e.preferred.passed(m.now) {
			continue
		}
		st, ok := o.statement(k.prefix)
		if ok && st.isPreferred() || !ok && !whole {
			continue
		}
		got = append(got, k.prefix)
	}
	for _, p := range o.prefixes {
		if e, ok := l.ra[raKey{p.Prefix, r.addr}]; p.Valid > 0 && p.Preferred > 0 && (!ok || e.preferred.passed(m.now)) {
			want = append(want, p.Prefix)
		}
	}
	if len(got)+len(want) > 0 {
		m.fail("a renumbering of %s no adversary word followed, at +%s: believed preferred %v, which the router no longer states preferred; not believed preferred %v, which it does (its offer %v)",
			r.addr, m.landing(), got, want, o.prefixes)
	}
}

// states reports whether o lists p; statement what its last listing says.
func (o *routerOffer) states(p netip.Prefix) bool {
	_, ok := o.statement(p)
	return ok
}

func (o *routerOffer) statement(p netip.Prefix) (statement, bool) {
	st, ok := statement{}, false
	for _, q := range o.prefixes {
		if q.Prefix == p {
			st, ok = statement{valid: q.Valid, preferred: min(q.Preferred, q.Valid)}, true
		}
	}
	return st, ok
}

// statingAt is the offer the router last advertised by at.
func (r *modelRouter) statingAt(at time.Time) *routerOffer {
	for i := len(r.offers) - 1; i > 0; i-- {
		if o := r.offers[i]; !o.first.IsZero() && !o.first.After(at) {
			return o
		}
	}
	return r.offers[0]
}

// omittedSince reports whether an offer first sent after at does not offer p.
func (r *modelRouter) omittedSince(p netip.Prefix, at time.Time) bool {
	for _, o := range r.offers {
		if !o.first.IsZero() && o.first.After(at) && !o.offersPrefix(p) {
			return true
		}
	}
	return false
}

// offersPrefix reports whether o offers p (valid > 0).
func (o *routerOffer) offersPrefix(p netip.Prefix) bool {
	st, ok := o.statement(p)
	return ok && st.offered()
}

// offers reports whether o offers any prefix (valid > 0).
func (o *routerOffer) offers() bool {
	return slices.ContainsFunc(o.prefixes, func(p RAPrefix) bool { return p.Valid > 0 })
}

func (m *model) at(d deadline) string {
	if d.never() {
		return "never"
	}
	return time.Time(d).Sub(t0).String()
}

func (m *model) fail(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("step %d at +%s: %s", m.steps, m.now.Sub(t0), fmt.Sprintf(format, args...))
}

// adversary plays one of the adversary's (or the router's renumbering) moves.
func (m *model) adversary() {
	op := m.next()
	if op%8 != 7 {
		m.moved(op)
	}
	m.as, m.replayed = m.r, m.r
	if m.b != nil && op%8 != 7 {
		// Two routers: whose address the adversary speaks from (or which
		// router renumbers, or is solicited), whose RA it replays.
		who := m.next()
		if who&1 == 1 {
			m.as = m.b
		}
		if who&2 != 0 {
			m.replayed = m.b
		}
	}
	switch op % 8 {
	case 0, 1, 2: // any RA (no prefix option at all, too)
		n := int(m.next() % 5)
		var ps []RAPrefix
		for range n {
			b := m.next()
			v := modelLifetimes[int(b)%len(modelLifetimes)]
			pr := modelLifetimes[int(b>>3)%len(modelLifetimes)]
			pfx := m.prefixes[int(m.next())%len(m.prefixes)]
			ps = append(ps, RAPrefix{Prefix: pfx, Valid: v, Preferred: min(pr, v), Autonomous: true})
		}
		m.speak(m.as, ps, op&0x10 == 0)
	case 3, 4: // a replay of a router's own RA
		if r := m.replayed; len(r.sent) > 0 {
			m.speak(m.as, r.sent[int(m.next())%len(r.sent)], op&0x10 == 0)
		}
	case 5:
		switch {
		case op&0x20 != 0: // the adversary starts or stops answering the agent's solicitations
			m.echo, m.echoOwn = !m.echo, op&0x40 != 0
		case op&0x48 == 0x48 && op&0x80 != 0: // not the adversary: the agent is down a while, then restarts
			m.goDown(time.Duration(m.next()) * 15 * time.Second)
		case op&0x48 == 0x48: // not the adversary: the agent restarts
			m.restart()
			m.agent()
		case op&0x40 != 0 && m.gap.IsZero(): // not the adversary: the listener reopens its socket
			m.closeSocket(time.Duration(m.next()+1) * 20 * time.Millisecond)
		case op&0x80 != 0: // a flood: the kernel drops the next words to arrive
			m.drop = 1 + int(m.next()%4)
		case op&0x18 == 0x18: // not the adversary: the agent's memory writes start or stop failing
			m.memoryStuck = !m.memoryStuck
		case op&0x18 == 0x10: // not the adversary: the user drops the router from trustedRouters, or names it again
			m.trust(m.distrusted)
		default:
			m.solicited(m.as) // the adversary solicits the router
		}
	case 6: // the router renumbers (a reload)
		m.renumber(m.as, op)
	case 7: // the adversary is quiet for a while
		m.runUntil(m.now.Add(time.Duration(m.next()) * time.Second))
	}
}

// trust sets whether the link trusts the router (trustedRouters names it,
// or names another address only): a router dropped is forgotten at once,
// and across a restart (its words in the memory are not put back).
func (m *model) trust(trusted bool) {
	m.tracef("the router trusted: %v", trusted)
	m.distrusted = !trusted
	pol := policy.Policy{GlobalOnly: true}
	if !trusted {
		pol.Trusted = []netip.Addr{netip.MustParseAddr("fe80::99")}
	} else {
		// Named again, the router's offer is forgotten as after a
		// reopen: a contradiction is not owed until the router speaks
		// again (an adversary's withdrawal of a prefix not believed
		// changes nothing; FuzzCorroboration 59bf5215a7f35cd3).
		m.reopened = m.now
	}
	m.setPolicies(pol)
	m.agent()
}

// speak: the adversary says ps from as's address, on as's link.
func (m *model) speak(as *modelRouter, ps []RAPrefix, multicast bool) {
	m.reopenDue()
	as.spokenAt, as.resaid = m.now, time.Time{}
	m.tracef("adversary says %v multicast=%v as %s", ps, multicast, as.addr)
	m.kernelHears(as.link, ps)
	if as == m.r {
		m.lastAdversary, m.said = m.now, ps
	}
	if m.now.Before(m.gap) {
		m.arrive(as, ps, multicast) // queued nowhere
		return
	}
	// A word that contradicts the router's offer and would change what
	// believing that offer left (omitting a deprecated prefix does not).
	router := New(as.link)
	router.OmitDeprecates = m.s.OmitDeprecates
	router.Corroboration = 0
	router.RA(as.link, as.addr, m.now, as.stating().prefixes)
	router.Corroboration = DefaultCorroboration
	rl := router.links[as.link]
	w := newWord(m.now, ps, m.s.OmitDeprecates)
	contradicts, _ := compare(newWord(m.now, as.stating().prefixes, m.s.OmitDeprecates), w)
	// Nor after a drop: the router's change may have been dropped, and the
	// word then looks to the agent like the router's own before it.
	owed := (m.reopened.IsZero() || !m.now.Before(m.reopened.Add(m.landing()))) &&
		(m.droppedAt.IsZero() || !m.now.Before(m.droppedAt.Add(m.landing())))
	// With --keep-omitted-prefixes a word that neither carries nor
	// contradicts the change waiting from its address (a router splitting
	// its offer over several RAs) is set aside, to come again: said once,
	// it moves nothing and owes no conflict.
	owed = owed && !m.keepOmitted
	if !m.arrive(as, ps, multicast) {
		owed = false // dropped
	}
	if contradicts && owed && rl.changes(as.addr, w) && as.conflictBy.IsZero() && !as.current().first.IsZero() && len(as.sent) > as.unheard {
		as.conflictBy = m.now.Add(m.landing())
	}
	m.agent()
}

// renumber: the router reloads onto a new offer, as op says: the next
// prefix of the pool, advertising the old one deprecated (RFC 9096) or
// omitting it (0x10); the same offer (0x08: a SIGHUP that changes nothing);
// or (0x20) nothing - its prefixes withdrawn (0x40: valid
// lifetime 0) or no prefix option at all (a home router that lost its ISP
// prefix). With 0x80 the reload also changes how it answers solicitations
// (unicast to multicast or back: a new configuration, a failover peer).
func (m *model) renumber(r *modelRouter, op byte) {
	cur := r.current()
	if cur.first.IsZero() {
		return // the last renumbering was never advertised
	}
	var ps []RAPrefix
	switch {
	case op&0x08 != 0:
		ps = cur.prefixes
	case op&0x20 != 0 && op&0x40 != 0:
		for _, p := range cur.prefixes {
			if p.Valid > 0 {
				ps = append(ps, RAPrefix{Prefix: p.Prefix, Autonomous: true})
			}
		}
	case op&0x20 != 0:
	default:
		next := r.pool[len(r.offers)%len(r.pool)]
		ps = []RAPrefix{{Prefix: next, Valid: time.Hour, Preferred: 30 * time.Minute, Autonomous: true}}
		if r.npt {
			ps = r.nptOffer(next)
		}
		if old := cur.prefixes; op&0x10 == 0 && len(old) > 0 && old[0].Valid > 0 && old[0].Prefix != next {
			ps = append(ps, RAPrefix{Prefix: old[0].Prefix, Valid: time.Hour, Autonomous: true})
		}
	}
	r.offers = append(r.offers, &routerOffer{prefixes: ps})
	r.initial = maxInitialRAs // a reload
	if op&0x80 != 0 {
		r.unicast = !r.unicast
		r.wasUnicast = r.wasUnicast || r.unicast
		r.answerAt = time.Time{} // the old daemon's answer is gone with it
	}
	m.tracef("router %s renumbers to %v, answering unicast %v", r.addr, ps, r.unicast)
	r.conflictBy = time.Time{} // the adversary's last word may be the new offer
	// It says so at once, as radvd does on a new configuration.
	at := m.now
	if !r.unicast && !r.lastMcast.IsZero() && at.Sub(r.lastMcast) < r.minDelay {
		at = r.lastMcast.Add(r.minDelay)
	}
	if at.Before(r.nextPeriodic) {
		r.nextPeriodic = at
	}
}

// awaitReads: the model's agent settles windows by what it has read
// (reads.go); off, by its clock, as before kernel receive times.
var awaitReads = os.Getenv("MODEL_SETTLE_BY_CLOCK") == ""

func runModel(t testing.TB, input []byte) int { return runWorld(t, world{}, input) }

// runWorld plays the model in w (routers_model_test.go).
func runWorld(t testing.TB, w world, input []byte) int {
	m := &model{t: t, s: New(w.links()...), now: t0, input: input, lastMove: t0, prefixes: modelPrefixes}
	m.s.AwaitReads = awaitReads
	m.s.ConflictBound, m.follow = w.bound, w.follow
	cfg := m.next()
	m.r = &modelRouter{
		addr:     routerA,
		link:     "eth0",
		pool:     modelPrefixes[:4],
		unicast:  cfg&1 == 1,
		interval: MinDelayBetweenRAs + time.Duration(cfg>>1)*time.Second/4,
		offers:   []*routerOffer{{prefixes: []RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: 30 * time.Minute, Autonomous: true}}}},
		minDelay: MinDelayBetweenRAs,
	}
	m.r.wasUnicast = m.r.unicast
	m.b = w.secondRouter()
	if m.b != nil {
		m.prefixes = append(slices.Clip(modelPrefixes), m.b.pool...)
	}
	m.setPolicies(policy.Policy{GlobalOnly: true})
	// The agent's options: --keep-omitted-prefixes, and the router's
	// MinDelayBetweenRAs above RFC 4861's 3 s (radvd's option; the user
	// tells the agent, --router-min-delay).
	opts := m.next()
	m.keepOmitted = opts&1 == 1
	m.s.OmitDeprecates = !m.keepOmitted
	switch opts >> 1 & 7 {
	case 5:
		m.r.minDelay = 4 * time.Second
	case 6:
		m.r.minDelay = 6 * time.Second
	case 7:
		m.r.minDelay = 10 * time.Second
	}
	m.s.RouterMinDelay = m.r.minDelay
	if b := m.next(); b < 0x80 {
		m.r.nextPeriodic = t0.Add(time.Duration(b) * 10 * time.Millisecond)
	} else {
		// The router started just before the agent (a power cut): its
		// first RA unheard, it is in its initial phase.
		r := m.r
		r.lastMcast = t0.Add(-time.Duration(b-0x80) * 20 * time.Millisecond)
		r.offers[0].first = r.lastMcast
		r.sent, r.unheard = append(r.sent, r.offers[0].prefixes), 1
		r.initial = maxInitialRAs - 1
		r.nextPeriodic = r.lastMcast.Add(min(r.interval, MaxInitialRtrAdvertInterval))
	}
	// The agent starts: its listener solicits.
	for _, name := range m.links() {
		m.s.Solicited(name, m.now)
		for _, r := range m.routers() {
			if r.link == name {
				m.solicited(r)
			}
		}
	}
	m.agent()
	for len(m.input) > 0 {
		d := time.Duration(m.next()) * 20 * time.Millisecond
		m.runUntil(m.now.Add(d))
		m.adversary()
	}
	m.runUntil(m.now.Add(time.Minute))
	return m.steps
}

// FuzzCorroboration plays the model above: the fuzzer is the adversary and
// chooses every delay the RFC leaves to the router.
func FuzzCorroboration(f *testing.F) {
	f.Add([]byte{0, 10, 50, 0, 3, 0x21, 0x22, 100, 6, 200, 3, 1, 0, 0, 1})
	f.Add([]byte{1, 10, 50, 6, 0, 3, 0, 100, 0, 2, 0xff, 0x40, 30, 3, 0})
	f.Add([]byte{0, 0, 10, 6, 5, 0, 0, 1, 0xc8, 5, 3, 2, 6, 7, 20})
	f.Add([]byte("replay the router's old word after it renumbers"))
	f.Add([]byte("a deprecated prefix with an infinite lifetime, twice"))
	// A multicasting router advertising every 34.75 s, the adversary
	// answering every solicitation unicast; the router renumbers.
	f.Add([]byte{0xfe, 10, 0, 0x25, 200, 6, 250, 7, 60, 0, 6, 200, 7, 90})
	// A multicasting router advertising every 66.75 s renumbers (a reload:
	// its initial phase); the adversary answers every solicitation unicast
	// and offers its own prefix just after the reload RA.
	f.Add([]byte{0xfe, 10, 0, 0x25, 200, 6, 0, 0, 1, 0x61, 4, 0, 7, 60})
	// A multicasting router that started 1 s before the agent (its first RA
	// unheard, its initial phase, holding its answer to the listener's
	// first solicitation 16 s); the adversary offers its prefix at once.
	f.Add([]byte{0xfe, 0xb2, 5, 0, 1, 0x19, 4, 0, 7, 60})
	// issue 42's RA holes, as the widened model plays them:
	// a router offering nothing (no prefix option), a spoofer offering its
	// prefix and answering every solicitation;
	f.Add([]byte{0xff, 10, 0, 0, 7, 30, 0, 0x26, 1, 0x65, 50, 0, 1, 31, 4, 0, 7, 60})
	// a router learnt to unicast its answers reloaded to multicast them
	// (the same offer), a spoofer offering its prefix just after the
	// reload RA and answering every solicitation at once;
	f.Add([]byte{0xff, 10, 0, 0, 7, 60, 0, 0x8e, 1, 0x65, 1, 0, 1, 31, 4, 0, 7, 60})
	// --keep-omitted-prefixes: the router renumbers, a spoofer offers its
	// prefix (believed: open), and must not move the router's;
	f.Add([]byte{0xff, 10, 1, 0, 7, 30, 0, 0x65, 1, 0, 1, 31, 4, 0, 6, 0, 7, 60})
	// radvd's MinDelayBetweenRAs 6 s, answering to all nodes: a spoofer
	// speaks 3.2 s after its multicast RA and answers at once.
	f.Add([]byte{0xfe, 10, 0x0c, 0, 7, 60, 0, 7, 12, 40, 0x65, 0, 0, 1, 31, 4, 0, 7, 60})
	// The restart hole (omitted_test.go): the router renumbers A to B
	// omitting A, the kernel keeps A's SLAAC address preferred (RFC 4862
	// 5.5.3 e), and the agent restarts a minute later, seeded with its
	// digest (A deprecated): before seedCap it reported A preferred again.
	f.Add([]byte{0, 0, 10, 0, 7, 60, 0, 0x16, 0, 7, 60, 0, 0x4d, 0, 7, 60})
	// Replays holding that renumbering back across a restart lengthened the
	// kernel's lifetimes past the router's: seeded preferred, A stayed
	// preferred 20 minutes past them until a contradiction ended the seed's
	// word (seedCap).
	f.Add(replaysAcrossARestart())
	// Quiet restarts (quietrestart_test.go): a router answering by unicast,
	// and one multicasting its answers every 34.75 s, each quiet for 200 s
	// before the agent restarts and a minute after; and the first after
	// renumbering A to B omitting A (A deprecated, its valid lifetime
	// running: the memory holds it as the router's word).
	f.Add([]byte{1, 0, 10, 0, 7, 200, 0, 0x4d, 0, 7, 60})
	f.Add([]byte{0xfe, 0, 10, 0, 7, 200, 0, 0x4d, 0, 7, 60})
	f.Add([]byte{1, 0, 10, 0, 7, 60, 0, 0x16, 0, 7, 200, 0, 0x4d, 0, 7, 60})
	// A replay right after a restart: the router re-sends A alike; the
	// agent is down 10 min (0xcd, 40), the router reloading onto B
	// meanwhile, unheard; a spoofer replays the router's first RA as the
	// agent restarts, before the router answers its solicitation. Taken
	// from the memory as re-sent alike, A was believed preferred until
	// +41m, the router's word ended at +31m
	// (TestAReplayRightAfterARestartRefreshesNothing).
	f.Add([]byte{3, 0, 10, 250, 7, 60, 50, 0xcd, 40, 0, 6, 0, 7, 255, 0, 7, 255, 0, 7, 90, 0, 3, 0, 0, 7, 60})
	// The memory's writes fail (0x1d) before the router renumbers A to B
	// (A deprecated), believed and published; the agent restarts on the
	// stale memory (A preferred); a spoofer replays the router's first RA
	// and answers every solicitation with it. B is never believed, and
	// once the startup grace ran out A was reported preferred on a word
	// from before the restart, the digest having carried it deprecated
	// (TestAMemoryOlderThanTheDigestPutsNoDeprecatedPrefixBack).
	f.Add([]byte{3, 0, 10, 250, 7, 60, 0, 0x1d, 0, 6, 0, 7, 60, 0, 0x4d, 0, 3, 0, 0, 0x65, 0, 7, 60})
	// The user drops the router from trustedRouters (0x15) a minute after
	// it was believed, and names it again later; then the same with a
	// restart while it is dropped, and with a renumbering while it is
	// dropped. Before SetPolicies forgot a dropped router's words, the
	// first failed at once: the router's A believed, untrusted.
	f.Add([]byte{1, 0, 10, 0, 7, 60, 0, 0x15, 0, 7, 60, 0, 0x15, 0, 7, 60})
	f.Add([]byte{1, 0, 10, 0, 7, 60, 0, 0x15, 0, 7, 60, 0, 0x4d, 0, 7, 60, 0, 0x15, 0, 7, 60})
	f.Add([]byte{0xfe, 0, 10, 0, 7, 60, 0, 0x15, 0, 6, 0, 7, 60, 0, 0x15, 0, 7, 120})
	f.Fuzz(func(t *testing.T, input []byte) {
		runModel(t, input)
	})
}

// BenchmarkCorroborationModel runs the model on random inputs of 4 KiB (a
// long randomized run beside the fuzzer's) and reports the steps checked.
func BenchmarkCorroborationModel(b *testing.B) {
	rng := rand.New(rand.NewPCG(42, 42))
	input := make([]byte, 4096)
	steps := 0
	for b.Loop() {
		for i := range input {
			input[i] = byte(rng.Uint32())
		}
		steps += runModel(b, input)
	}
	b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
}
