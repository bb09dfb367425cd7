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
// again (a withdrawal of a prefix not yet believed changes nothing).
//
// After every step: safety - a router that multicasts its answers is never
// taken for one that unicasts them (its window would end before its
// answer), and everything believed of the router's address is
// something the router stated, its lifetimes ending no later than the
// router's own statements of it (LifetimeSlack), whatever the reading delays;
// liveness - a renumbering no adversary word follows is believed within the
// router's answer delay plus the window (plus the reading delays, landing),
// and an adversary word contradicting the router's offer is reported as a
// conflict within the same time.

var modelPrefixes = []netip.Prefix{pA, pB, netip.MustParsePrefix("2001:db8:c::/64"), netip.MustParsePrefix("2001:db8:d::/64"), pX, netip.MustParsePrefix("2001:db8:bad:1::/64")}

var modelLifetimes = []time.Duration{0, time.Second, 30 * time.Second, 30 * time.Minute, time.Hour, 24 * time.Hour, Infinite}

// routerOffer is one offer the router makes, and when it stated it.
type routerOffer struct {
	prefixes []RAPrefix
	first    time.Time // first sent (zero: not yet)
	until    time.Time // the next offer first sent (zero: current)
}

type modelRouter struct {
	unicast  bool
	interval time.Duration
	offers   []*routerOffer
	sent     [][]RAPrefix // every RA it sent, for replays
	// unheard: how many of sent went out before the agent listened.
	unheard int
	// lastMcast, nextPeriodic, answerAt: its RFC 4861 timers.
	lastMcast, nextPeriodic, answerAt time.Time
	answerMcast                       bool
	// initial: the RAs left of its initial phase (after a reload).
	initial int
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
const landing = SolicitSpacing + MinDelayBetweenRAs + MaxInitialRtrAdvertInterval + MaxRADelay + DefaultCorroboration + 3*maxReadDelay + time.Millisecond

// arrival is a word the agent has yet to read.
type arrival struct {
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
	// echo: the adversary answers the agent's solicitations at once, unicast.
	echo bool
	// land: a renumbering to check at land (zero: none).
	land time.Time
	// conflictBy: a contradiction of the router's offer to be reported by then.
	conflictBy time.Time
	// gap: no socket is open until then (zero: one is); reopened: when one
	// last opened after a gap.
	gap, reopened time.Time
	steps         int
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
func (m *model) arrive(prefixes []RAPrefix, multicast bool) {
	if m.now.Before(m.gap) {
		m.tracef("no socket: the word is queued nowhere")
		return
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
	m.unread = append(m.unread, arrival{at: m.now, readAt: readAt, prefixes: prefixes, multicast: multicast})
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
		m.tracef("agent reads the word of +%s %v multicast=%v", a.at.Sub(t0), a.prefixes, a.multicast)
		m.s.Heard("eth0", routerA, a.at, a.prefixes, a.multicast)
	}
	if len(m.unread) == 0 {
		m.s.Read("eth0", m.now)
	}
}

// trace logs the model's events (MODEL_TRACE=1, to read a failure).
var trace = os.Getenv("MODEL_TRACE") != ""

func (m *model) tracef(format string, args ...any) {
	if trace {
		m.t.Logf("+%s "+format, append([]any{m.now.Sub(t0)}, args...)...)
	}
}

func (m *model) send(prefixes []RAPrefix, multicast bool) {
	m.tracef("router says %v multicast=%v", prefixes, multicast)
	r := m.r
	cur := r.current()
	if cur.first.IsZero() {
		cur.first = m.now
		if len(r.offers) > 1 {
			r.offers[len(r.offers)-2].until = m.now
			m.land = m.now.Add(landing)
		}
	}
	r.sent = append(r.sent, prefixes)
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
	m.arrive(prefixes, multicast)
}

// solicited: the router hears a solicitation at now.
func (m *model) solicited() {
	r := m.r
	d := m.delay()
	if r.unicast {
		if r.answerAt.IsZero() {
			r.answerAt, r.answerMcast = m.now.Add(d), false
		}
		m.tracef("router will answer at +%s", r.answerAt.Sub(t0))
		return
	}
	limited := !r.lastMcast.IsZero() && m.now.Sub(r.lastMcast) < MinDelayBetweenRAs
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
		at = r.lastMcast.Add(MinDelayBetweenRAs + d)
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
		r := m.r
		at := r.nextPeriodic
		if !r.answerAt.IsZero() && r.answerAt.Before(at) {
			at = r.answerAt
		}
		solicitAt := m.solicit()
		var readAt time.Time
		if len(m.unread) > 0 {
			readAt = m.unread[0].readAt
		}
		for _, c := range []time.Time{solicitAt, m.land, m.conflictBy, readAt, m.gap} {
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
		switch {
		case !r.answerAt.IsZero() && !r.answerAt.After(m.now):
			mc := r.answerMcast
			r.answerAt = time.Time{}
			m.send(r.current().prefixes, mc)
		case !r.nextPeriodic.After(m.now):
			m.send(r.current().prefixes, true)
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
	if len(due) > 0 {
		m.tracef("agent solicits")
		m.sendSolicitation()
	}
	return next
}

// sendSolicitation: the listener's solicitation goes out at now, and is
// reported; the router hears it, and the adversary answers it if it does.
func (m *model) sendSolicitation() {
	m.s.Solicited("eth0", m.now)
	m.solicited()
	if m.echo {
		m.now = m.now.Add(time.Nanosecond) // after the solicitation, never before the model's clock
		m.tracef("adversary answers at once")
		m.lastAdversary = m.now
		m.s.Heard("eth0", routerA, m.now, m.r.stating().prefixes, false)
	}
}

// closeSocket: the listener's socket closes for gap; what it queued unread
// is lost with it.
func (m *model) closeSocket(gap time.Duration) {
	m.tracef("listener closes its socket for %s, %d words unread", gap, len(m.unread))
	m.unread = nil
	m.gap = m.now.Add(gap)
	m.conflictBy = time.Time{}
}

// reopenDue opens the socket whose gap ended by now.
func (m *model) reopenDue() {
	if !m.gap.IsZero() && !m.now.Before(m.gap) {
		m.reopen()
	}
}

// reopen: at the gap's end a socket opens, reports the gap and solicits.
func (m *model) reopen() {
	m.gap, m.reopened = time.Time{}, m.now
	m.tracef("listener reopens its socket")
	m.s.Reopened("eth0", m.now)
	m.now = m.now.Add(time.Nanosecond) // the solicitation goes out after the socket opened
	m.sendSolicitation()
	if !m.land.IsZero() {
		m.land = later(m.land, m.now.Add(landing))
	}
}

// agent does what the agent's loop does at now, then checks.
func (m *model) agent() {
	m.reopenDue()
	m.read()
	m.solicit()
	m.s.Snapshot(m.now)
	m.check()
}

// check asserts safety and liveness at now.
func (m *model) check() {
	m.steps++
	if n := m.s.RouterAnswers("eth0", m.now)[AnswersUnicast]; n > 0 && !m.r.unicast {
		m.fail("takes the router, which multicasts its answers, for one that unicasts them")
	}
	l := m.s.links["eth0"]
	for k, e := range l.ra {
		if k.router != routerA {
			continue
		}
		var validBy, prefBy time.Time
		stated, statedPreferred, infinite := false, false, false
		for _, o := range m.r.offers {
			if o.first.IsZero() {
				continue
			}
			to := m.now
			if !o.until.IsZero() {
				to = o.until
			}
			for _, p := range o.prefixes {
				if p.Prefix != k.prefix || p.Valid == 0 {
					continue
				}
				stated = true
				infinite = infinite || p.Valid >= Infinite
				validBy = later(validBy, to.Add(p.Valid))
				if p.Preferred > 0 {
					statedPreferred = true
					prefBy = later(prefBy, to.Add(p.Preferred))
				}
			}
		}
		switch {
		case !stated:
			m.fail("believes %s, which the router never offered", k.prefix)
		case e.valid.never() && !infinite, !e.valid.never() && time.Time(e.valid).After(validBy.Add(LifetimeSlack)):
			m.fail("believes %s valid until %v, the router stated it until %s at most", k.prefix, m.at(e.valid), validBy.Sub(t0))
		case !e.preferred.passed(m.now) && !statedPreferred:
			m.fail("believes %s preferred, which the router never stated", k.prefix)
		case !e.preferred.passed(m.now) && (e.preferred.never() || time.Time(e.preferred).After(prefBy.Add(LifetimeSlack))):
			m.fail("believes %s preferred until %v, the router stated it until %s at most", k.prefix, m.at(e.preferred), prefBy.Sub(t0))
		}
	}
	if !m.land.IsZero() && !m.now.Before(m.land) {
		if m.lastAdversary.Before(m.land.Add(-landing)) {
			var want, got []netip.Prefix
			for _, p := range m.r.stating().prefixes {
				if p.Preferred > 0 {
					want = append(want, p.Prefix)
				}
			}
			for k, e := range l.ra {
				if k.router == routerA && !e.preferred.passed(m.now) {
					got = append(got, k.prefix)
				}
			}
			slices.SortFunc(got, netip.Prefix.Compare)
			slices.SortFunc(want, netip.Prefix.Compare)
			if !slices.Equal(got, want) {
				m.fail("a renumbering no adversary word followed: believed preferred %v at +%s, want %v", got, landing, want)
			}
		}
		m.land = time.Time{}
	}
	if !m.conflictBy.IsZero() {
		if len(m.s.Conflicts("eth0", m.now)) > 0 {
			m.conflictBy = time.Time{}
		} else if !m.now.Before(m.conflictBy) {
			m.fail("an adversary word contradicting the router was not reported as a conflict")
		}
	}
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
	switch op % 8 {
	case 0, 1, 2: // any RA
		n := int(m.next() % 5)
		var ps []RAPrefix
		for range n {
			b := m.next()
			v := modelLifetimes[int(b)%len(modelLifetimes)]
			pr := modelLifetimes[int(b>>3)%len(modelLifetimes)]
			pfx := modelPrefixes[int(m.next())%len(modelPrefixes)]
			ps = append(ps, RAPrefix{Prefix: pfx, Valid: v, Preferred: min(pr, v), Autonomous: true})
		}
		m.speak(ps, op&0x10 == 0)
	case 3, 4: // a replay of the router's own RA
		if len(m.r.sent) > 0 {
			m.speak(m.r.sent[int(m.next())%len(m.r.sent)], op&0x10 == 0)
		}
	case 5:
		if op&0x20 != 0 { // the adversary starts or stops answering the agent's solicitations
			m.echo = !m.echo
			break
		}
		if op&0x40 != 0 && m.gap.IsZero() { // not the adversary: the listener reopens its socket
			m.closeSocket(time.Duration(m.next()+1) * 20 * time.Millisecond)
			break
		}
		m.solicited() // the adversary solicits the router
	case 6: // the router renumbers
		m.renumber(op&0x10 != 0)
	case 7: // the adversary is quiet for a while
		m.runUntil(m.now.Add(time.Duration(m.next()) * time.Second))
	}
}

func (m *model) speak(ps []RAPrefix, multicast bool) {
	if len(ps) == 0 {
		return
	}
	m.reopenDue()
	m.lastAdversary = m.now
	m.tracef("adversary says %v multicast=%v", ps, multicast)
	if m.now.Before(m.gap) {
		m.arrive(ps, multicast) // queued nowhere
		return
	}
	w := newWord(m.now, ps, true)
	// A word that contradicts the router's offer and would change what
	// believing that offer left (omitting a deprecated prefix does not).
	router := New("eth0")
	router.Corroboration = 0
	router.RA("eth0", routerA, m.now, m.r.stating().prefixes)
	router.Corroboration = DefaultCorroboration
	contradicts, _ := compare(newWord(m.now, m.r.stating().prefixes, true), w)
	owed := m.reopened.IsZero() || !m.now.Before(m.reopened.Add(landing))
	if contradicts && owed && router.links["eth0"].changes(routerA, w) && m.conflictBy.IsZero() && !m.r.current().first.IsZero() && len(m.r.sent) > m.r.unheard {
		m.conflictBy = m.now.Add(landing)
	}
	m.arrive(ps, multicast)
	m.agent()
}

// renumber: the router moves to the next prefix of the pool, advertising
// the old one deprecated (RFC 9096) or omitting it.
func (m *model) renumber(omit bool) {
	r := m.r
	cur := r.current()
	if cur.first.IsZero() {
		return // the last renumbering was never advertised
	}
	next := modelPrefixes[len(r.offers)%4]
	ps := []RAPrefix{{Prefix: next, Valid: time.Hour, Preferred: 30 * time.Minute, Autonomous: true}}
	if !omit {
		ps = append(ps, RAPrefix{Prefix: cur.prefixes[0].Prefix, Valid: time.Hour, Autonomous: true})
	}
	r.offers = append(r.offers, &routerOffer{prefixes: ps})
	r.initial = maxInitialRAs // a reload
	m.tracef("router renumbers to %v", ps)
	m.conflictBy = time.Time{} // the adversary's last word may be the new offer
	// It says so at once, as radvd does on a new configuration.
	at := m.now
	if !r.unicast && !r.lastMcast.IsZero() && at.Sub(r.lastMcast) < MinDelayBetweenRAs {
		at = r.lastMcast.Add(MinDelayBetweenRAs)
	}
	if at.Before(r.nextPeriodic) {
		r.nextPeriodic = at
	}
}

// awaitReads: the model's agent settles windows by what it has read
// (reads.go); off, by its clock, as before kernel receive times.
var awaitReads = os.Getenv("MODEL_SETTLE_BY_CLOCK") == ""

func runModel(t testing.TB, input []byte) int {
	m := &model{t: t, s: New("eth0"), now: t0, input: input}
	m.s.AwaitReads = awaitReads
	m.s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	cfg := m.next()
	m.r = &modelRouter{
		unicast:  cfg&1 == 1,
		interval: MinDelayBetweenRAs + time.Duration(cfg>>1)*time.Second/4,
		offers:   []*routerOffer{{prefixes: []RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: 30 * time.Minute, Autonomous: true}}}},
	}
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
	m.s.Solicited("eth0", m.now)
	m.solicited()
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
