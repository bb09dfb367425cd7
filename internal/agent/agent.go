// Package agent runs the node agent's loop: it owns the observed state, starts an
// RA listener per watched link, folds RA and kernel events into the digest, logs
// one journal line per real change, and hands the encoded digest to the publisher
// once the network has settled.
package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/agent/ra"
	"github.com/renumber/renumber/internal/digest"
)

// Publisher receives the encoded digest whenever it may be written.
type Publisher interface{ Want(string) }

// Listener is what the agent needs of an RA listener.
type Listener interface {
	Run(ctx context.Context)
	Restart()
	// Solicit sends a Router Solicitation soon, and reports it sent through
	// the solicited handler.
	Solicit()
	// Sync asks for a Read report: the next time the listener has handed
	// over everything that arrived, it says so (observe/reads.go).
	Sync()
}

// Reports are the agent's handlers a listener reports to: ra's, so the two
// cannot drift apart.
type Reports = ra.Reports

// NewListener makes the RA listener for one link.
type NewListener func(link string, r Reports) Listener

// Config holds the agent's tunables.
type Config struct {
	// StartupGrace is how long to wait for the first RA on every link before the
	// first publication (a restart must not publish a half-observed digest).
	StartupGrace time.Duration
	// KeepOmitted: a prefix a router stops mentioning keeps its preferred
	// lifetime (for routers that split their prefixes over several RAs); by
	// default the router's RA is its whole offer and the omitted prefix is
	// deprecated at once.
	KeepOmitted bool
	// Corroboration: a change a router's RA makes is believed once the router
	// was solicited and said it again, with nothing from its address
	// contradicting it until the latest the router may answer plus this
	// margin (observe.DefaultCorroboration; zero believes every RA at once).
	Corroboration time.Duration
	// ConflictHold: how long a router whose address contradicted itself is
	// reported in conflict (observe.DefaultConflictHold when zero).
	ConflictHold time.Duration
	// ConflictBound: how long a router's offer stays preferred once two
	// speakers on its address disagree, unless corroborated again (zero:
	// until the lifetimes the router stated run out).
	ConflictBound time.Duration
	// RouterMinDelay: the routers' MinDelayBetweenRAs where it is set above
	// RFC 4861's 3 s (radvd's option): a router multicasting its answers
	// holds one that long after its last multicast RA (zero: 3 s).
	RouterMinDelay time.Duration
	// StateDir: where the agent keeps its memory of the routers across a
	// restart (memory.go; empty: none, the digest's seed alone).
	StateDir string
	// Node is this node's name, which names the memory's file (Start sets
	// it from Parts.Node).
	Node string
}

// Agent is the loop. All state is touched only by Run's goroutine.
type Agent struct {
	cfg         Config
	clock       clock.Clock
	log         *slog.Logger
	pub         Publisher
	newListener NewListener
	// hardware returns a link's own link-layer address, "" unknown
	// (interfaceHardware; the memory is checked against it).
	hardware func(link string) string

	events    chan func()
	state     *observe.State
	listeners map[string]listenerRun
	started   time.Time
	last      digest.Node
	seed      digest.Node
	// seedSpent: the agent has published, and the Node carries its digest,
	// not seed: a link watched anew since starts from nothing.
	seedSpent bool
	rejected  map[string]bool
	ignored   map[string]*ignoring // link + " " + router: RAs not believed
	quiet     rejectLines
	junior    map[string]bool         // link + " " + prefix: it appeared from a router other than the senior one
	conflicts map[string][]netip.Addr // link -> the routers in conflict at the last evaluation
	// lagging: links whose listener was reported reading behind.
	lagging map[string]bool
	// pdConflicts: link -> when its DHCPv6 client last heard answers under
	// one DUID contradict each other; pdConflicted: reported so far.
	pdConflicts  map[string]time.Time
	pdConflicted map[string]bool
	// offers: link -> what the server offered this node's prober.
	offers map[string]offer
	// linksKnown: SetLinks has run; before that nothing is published.
	linksKnown bool
	// memory: the routers' words the agent believed before it restarted
	// (read from StateDir at start); written: the memory last written;
	// memoryFailing: the last write failed (said once).
	memory        observe.Memory
	written       observe.Memory
	memoryFailing bool
	// evaluations counts the loop's evaluations (tests wait for the one after
	// their events).
	evaluations uint64
}

type listenerRun struct {
	l      Listener
	cancel context.CancelFunc
}

// New returns an agent. published is the digest the Node carries now (zero if
// none): it seeds frozen lifetimes and is the baseline for journal lines.
func New(cfg Config, clk clock.Clock, log *slog.Logger, pub Publisher, nl NewListener, published digest.Node) *Agent {
	a := &Agent{
		cfg: cfg, clock: clk, log: log, pub: pub, newListener: nl,
		events:    make(chan func(), 256),
		state:     observe.New(),
		listeners: map[string]listenerRun{},
		last:      published,
		seed:      published,
		rejected:  map[string]bool{},
		ignored:   map[string]*ignoring{},
		junior:    map[string]bool{},
		conflicts: map[string][]netip.Addr{},
		lagging:   map[string]bool{},

		pdConflicts:  map[string]time.Time{},
		pdConflicted: map[string]bool{},
		offers:       map[string]offer{},
		hardware:     interfaceHardware,
	}
	a.state.OmitDeprecates = !cfg.KeepOmitted
	a.state.Corroboration = cfg.Corroboration
	if cfg.ConflictHold > 0 {
		a.state.ConflictHold = cfg.ConflictHold
	}
	a.state.ConflictBound = cfg.ConflictBound
	a.state.RouterMinDelay = cfg.RouterMinDelay
	// The listener stamps RAs when they arrived and reports what it has
	// read: a window is settled by what arrived in it, however late read.
	a.state.AwaitReads = true
	a.openMemory()
	return a
}

// SetLinks changes the watched links and the policy on each. Safe from any
// goroutine.
func (a *Agent) SetLinks(links map[string]policy.Policy) {
	a.events <- func() { a.setLinks(links) }
}

// RA takes a multicast RA (Heard).
func (a *Agent) RA(link string, router netip.Addr, at time.Time, p []observe.RAPrefix) {
	a.Heard(link, router, at, p, true)
}

// Heard is the handler for RA listeners. Safe from any goroutine.
func (a *Agent) Heard(link string, router netip.Addr, at time.Time, p []observe.RAPrefix, multicast bool) {
	a.events <- func() {
		if !a.state.Heard(link, router, at, p, multicast) {
			a.untrusted(link, router, at)
		}
	}
}

// Solicited is the handler for a Router Solicitation sent on link at at. Safe
// from any goroutine.
func (a *Agent) Solicited(link string, at time.Time) {
	a.events <- func() { a.state.Solicited(link, at) }
}

// Address is the handler for kernel address events. Safe from any goroutine.
func (a *Agent) Address(link string, addr observe.Address, removed bool, at time.Time) {
	a.events <- func() {
		a.log.Debug("kernel address", "link", link, "addr", addr.Addr, "removed", removed, "deprecated", addr.Deprecated)
		a.state.Address(link, addr, removed, at)
	}
}

// Delegated is the handler for a prefix delegated to the node (a DHCPv6
// client's route) appearing or going. Safe from any goroutine.
func (a *Agent) Delegated(p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
	a.events <- func() {
		a.log.Debug("delegated prefix", "prefix", p, "valid", valid, "removed", removed)
		a.state.Delegated(p, valid, removed, at)
	}
}

// Link records a link going down or up; on up it restarts the link's RA
// listener so it solicits at once. Safe from any goroutine.
func (a *Agent) Link(link string, up bool, at time.Time) {
	a.events <- func() {
		a.state.Link(link, up, at)
		if r, ok := a.listeners[link]; ok && up {
			r.l.Restart()
		}
	}
}

// Run is the loop; it returns when ctx ends, after stopping its listeners.
func (a *Agent) Run(ctx context.Context) {
	a.started = a.clock.Now()
	defer func() {
		for _, r := range a.listeners {
			r.cancel()
		}
	}()
	var timer clock.Timer
	for {
		var wake <-chan time.Time
		if at, ok := a.evaluate(); ok {
			timer = a.clock.NewTimer(max(at.Sub(a.clock.Now()), 0))
			wake = timer.C()
		}
		select {
		case <-ctx.Done():
			return
		case f := <-a.events:
			f()
		case <-wake:
		}
		// Drain whatever else arrived, so a burst is one evaluation - and,
		// on a timer, so an RA heard before a window's end is counted
		// before the window is settled (select picks at random among
		// ready cases).
		for more := true; more; {
			select {
			case f := <-a.events:
				f()
			default:
				more = false
			}
		}
		if timer != nil {
			timer.Stop()
			timer = nil
		}
	}
}

func (a *Agent) setLinks(links map[string]policy.Policy) {
	a.linksKnown = true
	names := make([]string, 0, len(links))
	for l := range links {
		names = append(names, l)
	}
	slices.Sort(names)
	if !slices.Equal(names, a.state.Links()) {
		a.log.Info("watching links", "links", names)
	}
	added := map[string]bool{}
	for _, l := range names {
		added[l] = !slices.Contains(a.state.Links(), l)
	}
	a.state.SetLinks(names...)
	for _, l := range names {
		if added[l] {
			a.state.SetHardware(l, a.hardware(l))
		}
	}
	// Frozen lifetimes of links watched anew come from what the Node carried at
	// start, so a restart republishes nothing - until the agent publishes: the
	// Node then carries no link it did not watch, and seed may be days old.
	var seed digest.Node
	for _, l := range a.seed.Links {
		if added[l.Name] && !a.seedSpent {
			// An offer the prober reported is no observation of the link.
			l.Prefixes = slices.DeleteFunc(slices.Clone(l.Prefixes), func(p digest.Prefix) bool { return p.Sources == digest.SourceOffer })
			seed.Links = append(seed.Links, l)
		}
	}
	// The policies first: the memory restores no word of a router the
	// link no longer trusts (trustedRouters changed while the agent was
	// down), and Remember's filter sees only the policies set.
	a.state.SetPolicies(links)
	a.state.Seed(seed)
	if !a.seedSpent {
		// What the routers stated, as believed before the restart: held
		// as a running agent holds it (observe/memory.go).
		var mem observe.Memory
		for _, l := range a.memory.Links {
			switch {
			case !added[l.Name]:
			case l.Another(a.state.Hardware(l.Name)):
				a.log.Warn("the memory of the routers names another interface: not used", "link", l.Name,
					"written", l.Hardware, "now", a.state.Hardware(l.Name))
			default:
				mem.Links = append(mem.Links, l)
			}
		}
		if n := a.state.Remember(mem, a.clock.Now()); n > 0 {
			a.log.Info("remembered the routers' words", "words", n, "written", a.memory.At)
		}
	}
	for link, r := range a.listeners {
		if _, ok := links[link]; !ok {
			r.cancel()
			delete(a.listeners, link)
		}
	}
	for _, link := range names {
		if _, ok := a.listeners[link]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		l := a.newListener(link, Reports{Heard: a.Heard, Solicited: a.Solicited, Read: a.Read, Lost: a.Lost, Reopened: a.Reopened})
		a.listeners[link] = listenerRun{l: l, cancel: cancel}
		go l.Run(ctx)
	}
}

// evaluate snapshots the state, logs changes, publishes when settled, and returns
// when it must run again without an event.
func (a *Agent) evaluate() (time.Time, bool) {
	a.evaluations++
	if !a.linksKnown {
		return time.Time{}, false
	}
	now := a.clock.Now()
	// Changes heard are put to the routers at once, publication or not.
	solicitAt := a.solicit(now)
	a.state.Settle(now)
	waiting := a.syncReads(now)
	// Until every link has had its first RA, every prefix the Node carried
	// preferred on a router's word has been stated again by a believed RA
	// (a second router's, on a link with two: observe.State.Restated), and
	// a delegation the Node carried is back (or the grace ran out), the
	// state is half-observed: publishing or journaling it would be noise.
	// (No Snapshot before then: it would forget the lifetimes seeded from
	// the Node.)
	// A first RA heard late is being corroborated as the grace runs out: it
	// gets one more grace to settle, so the first publication carries it
	// rather than a second one following.
	grace := a.started.Add(a.cfg.StartupGrace)
	if a.state.Corroborating() {
		grace = grace.Add(a.cfg.StartupGrace)
	}
	if waiting && !now.Before(grace) {
		// A window passed and waits only for the listener to report it
		// read up to its end, which it does at once unless a flood holds
		// it: one more grace at most.
		grace = grace.Add(a.cfg.StartupGrace)
	}
	if (!a.state.Restated() || (delegated(a.seed) && !a.state.Delegating(now))) && now.Before(grace) {
		if t, ok := a.state.NextDeadline(now); ok && t.Before(grace) {
			grace = t // a change to corroborate may settle first
		}
		if !solicitAt.IsZero() && solicitAt.Before(grace) {
			grace = solicitAt
		}
		return grace, true
	}
	a.state.Reserve = a.liveOffers(now) // markOffers adds them after
	node, rejected := a.state.Snapshot(now)
	a.keepMemory(now)
	a.journal(node, rejected)
	a.journalConflicts(now)
	pdLapses := a.markDelegationConflicts(&node, now)
	offerLapses := a.markOffers(&node, now)

	var wake []time.Time
	if !offerLapses.IsZero() {
		wake = append(wake, offerLapses)
	}
	if t, ok := a.state.NextDeadline(now); ok {
		wake = append(wake, t)
	}
	if !pdLapses.IsZero() {
		wake = append(wake, pdLapses)
	}
	if !solicitAt.IsZero() {
		wake = append(wake, solicitAt)
	}
	enc, err := digest.Encode(node)
	if err != nil {
		// Snapshot bounds the digest, so this is a bug, not bad input.
		a.log.Error("cannot encode digest", "err", err)
	} else {
		a.pub.Want(enc)
		a.seedSpent = true
	}
	if len(wake) == 0 {
		return time.Time{}, false
	}
	return slices.MinFunc(wake, func(x, y time.Time) int { return x.Compare(y) }), true
}

// solicit asks the listeners of the links where a change waits to be put to
// the router to solicit, and returns when the next one falls due (zero: none).
func (a *Agent) solicit(now time.Time) time.Time {
	due, next := a.state.Solicit(now)
	for _, link := range due {
		if r, ok := a.listeners[link]; ok {
			r.l.Solicit()
		}
	}
	return next
}

// delegated reports whether n shows a delegation: after a restart, the
// DHCPv6 client (the agent's own or the node's) takes a moment to confirm it.
func delegated(n digest.Node) bool {
	for _, l := range n.Links {
		if slices.ContainsFunc(l.Prefixes, func(p digest.Prefix) bool { return p.Sources&digest.SourcePD != 0 }) {
			return true
		}
	}
	return false
}

func (a *Agent) journal(node digest.Node, rejected []observe.Rejected) {
	at := a.clock.Now()
	for _, c := range digest.Diff(a.last, node) {
		metricPrefixEvents.With(string(c.Kind)).Inc()
		attrs := []any{}
		routers := a.state.Routers(c.Link, c.Prefix)
		if len(routers) > 0 && c.Kind != digest.Gone {
			attrs = append(attrs, "routers", routers)
		}
		// Changes from routers other than the link's senior one (a host
		// flooding fresh prefixes, say) are rate-limited like rejections.
		from := c.Link + " " + c.Prefix.String()
		if c.Kind == digest.Appeared {
			a.junior[from] = len(routers) > 0 && !slices.ContainsFunc(routers, func(r netip.Addr) bool { return a.state.Senior(c.Link, r) })
		}
		junior := a.junior[from]
		if c.Kind == digest.Gone {
			delete(a.junior, from)
		}
		if junior && !a.quiet.allow(c.Link, at) {
			continue
		}
		a.log.Info(c.String(), attrs...)
	}
	// A copy: evaluate goes on to add the offers and the delegation
	// conflicts to node's links in place, which the next snapshot does not
	// have - kept shared, every evaluation logged the offer gone.
	a.last = node.Canonical()
	now := map[string]bool{}
	for _, r := range rejected {
		key := r.Link + " " + r.Prefix.String()
		now[key] = true
		if !a.rejected[key] {
			metricRejected.Inc()
			if a.quiet.allow(r.Link, at) {
				a.log.Warn(r.Link+": ignoring prefix "+r.Prefix.String(), "reason", r.Reason)
			}
		}
	}
	a.rejected = now
	for _, s := range a.quiet.summaries(at) {
		a.log.Warn(s)
	}
}

// rejectLines keeps the journal readable under a flood: per link, at most
// rejectBurst "ignoring prefix" lines per rejectWindow, then one summary of
// how many more were left out.
type rejectLines struct {
	window map[string]*rejectWindow
}

type rejectWindow struct {
	start         time.Time
	logged, extra int
}

const (
	rejectBurst     = 3
	rejectWindowLen = 10 * time.Second
)

func (q *rejectLines) allow(link string, now time.Time) bool {
	if q.window == nil {
		q.window = map[string]*rejectWindow{}
	}
	w := q.window[link]
	if w == nil || now.Sub(w.start) >= rejectWindowLen && w.extra == 0 {
		w = &rejectWindow{start: now}
		q.window[link] = w
	}
	if w.logged < rejectBurst {
		w.logged++
		return true
	}
	w.extra++
	return false
}

// summaries returns one line per link whose window ended with prefixes left
// unlogged, and starts a new window for it.
func (q *rejectLines) summaries(now time.Time) []string {
	var out []string
	for link, w := range q.window {
		if w.extra > 0 && now.Sub(w.start) >= rejectWindowLen {
			out = append(out, fmt.Sprintf("%s: %d more prefix changes from other routers and prefixes ignored in the last %s (filtered, untrusted or over the digest's %d) not logged",
				link, w.extra, now.Sub(w.start).Round(time.Second), digest.MaxPrefixes))
			q.window[link] = &rejectWindow{start: now}
		}
	}
	slices.Sort(out)
	return out
}

// ignoring counts the RAs of one router not believed since the last log line.
type ignoring struct {
	count  int
	logged time.Time
}

// ignoredSummary is how often a router whose RAs keep being ignored is logged.
const ignoredSummary = 10 * time.Minute

// maxIgnored bounds the routers remembered: sources are whatever a host on the
// link puts in its packets.
const maxIgnored = 64

// untrusted counts an RA from a router no DynamicPrefix of the link trusts:
// one log line the first time, then a summary at most every ignoredSummary.
func (a *Agent) untrusted(link string, router netip.Addr, at time.Time) {
	metricIgnored.With(link, "untrusted").Inc()
	key := link + " " + router.String()
	ig := a.ignored[key]
	if ig == nil {
		if len(a.ignored) >= maxIgnored {
			key = link + " others"
			if ig = a.ignored[key]; ig == nil {
				ig = &ignoring{}
				a.ignored[key] = ig
			}
		} else {
			ig = &ignoring{}
			a.ignored[key] = ig
		}
	}
	ig.count++
	switch {
	case ig.logged.IsZero():
		a.log.Warn(link + ": ignoring router advertisements from " + router.String() + ": not a trusted router (trustedRouters)")
	case at.Sub(ig.logged) >= ignoredSummary:
		a.log.Warn(fmt.Sprintf("%s: %d router advertisements from %s ignored in the last %s: not a trusted router",
			link, ig.count, strings.TrimPrefix(key, link+" "), at.Sub(ig.logged).Round(time.Second)))
	default:
		return
	}
	ig.count, ig.logged = 0, at
}
