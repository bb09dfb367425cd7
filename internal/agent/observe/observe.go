// Package observe is the agent's pure core: it folds Router Advertisement prefixes
// and kernel address events, per link, into the digest the agent publishes. It
// holds no sockets and reads no clock; callers pass the time in.
//
// Rules:
//   - A prefix is on a link while any router's last RA keeps it valid, or the kernel
//     holds a global address in it.
//   - Routers decide: a prefix some router advertises is reported with source ra,
//     preferred while any router's last RA keeps its preferred lifetime running.
//     Only a prefix no router advertises (a static address, DHCPv6) is reported by
//     its addresses (source addr), preferred or deprecated as they are.
//   - An RA is believed once corroborated (corroborate.go): one that changes
//     what its router offers waits for the router's answer to a solicitation.
//   - A router whose RA offers prefixes but omits one it advertised before has
//     stopped offering it (a router rebooted onto a new ISP prefix says nothing of
//     the old one): once believed, that router's claim is deprecated at once, its
//     valid lifetime left to run out. The kernel keeps the old address preferred meanwhile, which
//     is why routers decide. OmitDeprecates turns this off for routers that
//     split their prefixes over several RAs.
//   - A PIO with valid lifetime 0 withdraws that router's claim at once.
//   - The valid lifetime left when a prefix first turns deprecated (the routers'
//     word again, if any advertises it) is frozen into the digest, so the value
//     does not change on every RA.
//   - On a link whose policy follows a deprecated prefix, one the senior router
//     advertises only deprecated stands in for a preferred one while no router
//     prefers an acceptable prefix there (standin.go).
package observe

import (
	"net/netip"
	"slices"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// Infinite is the lifetime that never runs out (0xffffffff seconds on the wire).
const Infinite = time.Duration(0xffffffff) * time.Second

// RAPrefix is one Prefix Information option, already validated.
type RAPrefix struct {
	Prefix    netip.Prefix
	Valid     time.Duration
	Preferred time.Duration
	// Autonomous: the A flag; hosts form SLAAC addresses from /64s carrying it.
	Autonomous bool
}

// Address is one kernel address on a link.
type Address struct {
	Addr       netip.Prefix // address with its prefix length
	Valid      time.Duration
	Preferred  time.Duration
	Deprecated bool // IFA_F_DEPRECATED
	// Permanent: IFA_F_PERMANENT, an address configured, not formed by SLAAC.
	Permanent bool
}

type raKey struct {
	prefix netip.Prefix
	router netip.Addr
}

// deadline is an absolute time; the zero value means never.
type deadline time.Time

func until(now time.Time, d time.Duration) deadline {
	if d >= Infinite {
		return deadline{}
	}
	return deadline(now.Add(d))
}

func (d deadline) never() bool { return time.Time(d).IsZero() }

func (d deadline) passed(now time.Time) bool { return !d.never() && !now.Before(time.Time(d)) }

func (d deadline) remaining(now time.Time) time.Duration {
	if d.never() {
		return Infinite
	}
	return max(time.Time(d).Sub(now), 0)
}

// lifetimes is when a prefix's lifetimes run out; for a router's believed
// offer, also what the word that set them stated.
type lifetimes struct {
	valid, preferred deadline
	stated           statement
	at               time.Time
	// alike: the router re-sends this prefix's lifetimes alike (a word
	// stating the same lifetimes later was corroborated), so a word doing so
	// moves the ends forward without being a proposal. Unknown until then: a
	// router that counts down must not have an old word replayed as new.
	alike bool
	// doubted: a word from the router's address contradicted another since
	// this was believed; restating it is a proposal too (corroborate.go).
	doubted bool
	// omitted: a believed word of its router omitted it - one that offered
	// nothing, or its whole offer (the router stopped mentioning it, and
	// left it to its lifetimes); restating it is a proposal too, never a
	// re-send: a replay of the router's old RA would refresh it for ever.
	omitted bool
}

type link struct {
	ra     map[raKey]lifetimes
	addrs  map[netip.Addr]addrEntry
	frozen map[netip.Prefix]time.Duration // remaining valid lifetime at deprecation
	// vouched: prefixes a trusted router advertised, while something of them
	// is still seen (Policy.Trusted), and on whose word (vouch).
	vouched map[netip.Prefix]vouch
	// seeded: how the digest published before a restart carried each
	// prefix still vouched for on its word (Seed, seedCap).
	seeded map[netip.Prefix]seedCap
	// kept: the prefixes the last digest carried (Snapshot's eviction).
	kept map[netip.Prefix]bool
	// since: when each router still advertising here was first heard (at
	// most maxRouters; Snapshot's eviction ranks senior routers first).
	since map[netip.Addr]time.Time
	sawRA bool
	down  bool
	upAt  time.Time

	// Corroboration (corroborate.go).
	speakers       map[netip.Addr]*speaker
	voices         map[netip.Addr]*voice // how each address speaks (answer.go)
	voiceFloor     time.Time             // the latest an address forgotten spoke
	untrusted      time.Time             // the latest an address not trusted spoke
	firstAsked     time.Time             // the first solicitation since the link was up
	minDelay       time.Duration         // the routers' MinDelayBetweenRAs (State.fit)
	asked          time.Time             // the last Router Solicitation sent
	requested      time.Time             // a solicitation asked for and not yet reported sent
	contradictions uint64
	// contradicted: a word from some address here contradicted another
	// since the State began (seedCap).
	contradicted bool
	crowded      uint64
	// read: every RA that arrived before it has been handled (reads.go);
	// known: what was read as of the last word or solicitation handled
	// (answer.go trusts the last multicast RA heard only that far).
	read, known time.Time

	// standIn: the deprecated prefix reported as preferred (standin.go).
	standIn netip.Prefix
	// hardware: the link's own link-layer address, "" unknown (memory.go).
	hardware string
}

type addrEntry struct {
	prefix     netip.Prefix
	lifetimes  lifetimes
	deprecated bool
	permanent  bool
	// held: the kernel removed the address around a link flap; it still counts,
	// while the link is down and until heldUntil after it is up, unless re-created.
	held      bool
	heldUntil time.Time
}

// State is what one agent knows about its watched links.
type State struct {
	links    map[string]*link
	policies map[string]policy.Policy
	// LinkGrace is how long after a link comes back up the addresses the kernel
	// flushed when it went down still count. The kernel removes SLAAC addresses on
	// link down (keep_addr_on_down keeps only static ones) and forms them again
	// after the next RA and DAD: without this a link flap would be two or three
	// digest changes for a network that did not change.
	LinkGrace time.Duration
	// OmitDeprecates: an RA that omits a prefix its router advertised before
	// deprecates that prefix for the router (default true).
	OmitDeprecates bool
	// delegated: the prefixes delegated to the node (DHCPv6-PD, host mode),
	// until when each is valid.
	delegated map[netip.Prefix]deadline
	// Corroboration: the margin a window adds to the latest the router may
	// answer a solicitation (answer.go) before a change its address
	// announced is believed (corroborate.go). Zero believes every RA at once.
	Corroboration time.Duration
	// ConflictBound: with two speakers on a router's address, its believed
	// offer stays preferred no longer than this after their first
	// contradiction, unless a word is corroborated again (zero: until the
	// lifetimes the router stated run out).
	ConflictBound time.Duration
	// ConflictHold: how long a router whose address contradicted itself is
	// reported in conflict after the last contradiction.
	ConflictHold time.Duration
	// AwaitReads: a window is settled only once the link's RAs are read up
	// to its end (reads.go), not when the clock passes it. The agent, whose
	// listener stamps RAs with the kernel's receive time and reports Read,
	// sets it; tests of the rules alone may leave it off.
	AwaitReads bool
	// RouterMinDelay: the routers' MinDelayBetweenRAs where it is above RFC
	// 4861's 3 s (radvd's option; zero or less: 3 s). A router that
	// multicasts its answers holds one that long after its last multicast
	// RA (answer.go), and only the user can say so: an attacker can add RAs.
	RouterMinDelay time.Duration
	// Reserve: digest slots Snapshot leaves free for what the agent adds
	// after it (a confirmer's DHCPv6 offers): a router advertising enough
	// prefixes filled the digest, and the offer was left out unsaid.
	Reserve int
}

// DefaultLinkGrace covers an RA interval plus DAD.
const DefaultLinkGrace = 10 * time.Second

// New returns a State watching the given links.
func New(links ...string) *State {
	s := &State{links: map[string]*link{}, LinkGrace: DefaultLinkGrace, OmitDeprecates: true, delegated: map[netip.Prefix]deadline{},
		Corroboration: DefaultCorroboration, ConflictHold: DefaultConflictHold}
	s.SetLinks(links...)
	return s
}

// SetLinks changes the watched set; links no longer watched are forgotten.
func (s *State) SetLinks(names ...string) {
	keep := map[string]bool{}
	for _, n := range names {
		keep[n] = true
		if s.links[n] == nil {
			s.links[n] = &link{ra: map[raKey]lifetimes{}, addrs: map[netip.Addr]addrEntry{}, frozen: map[netip.Prefix]time.Duration{},
				vouched: map[netip.Prefix]vouch{}, seeded: map[netip.Prefix]seedCap{}, since: map[netip.Addr]time.Time{},
				speakers: map[netip.Addr]*speaker{}, voices: map[netip.Addr]*voice{}}
		}
	}
	for n := range s.links {
		if !keep[n] {
			delete(s.links, n)
		}
	}
}

// SetHardware records the link-layer address of the interface name is now
// ("" unknown): the memory is written with it, and a memory written of
// another is not put back (Remember). Call it before Remember.
func (s *State) SetHardware(name, hardware string) {
	if l := s.links[name]; l != nil {
		l.hardware = hardware
	}
}

// Hardware returns the link-layer address SetHardware recorded for name.
func (s *State) Hardware(name string) string {
	if l := s.links[name]; l != nil {
		return l.hardware
	}
	return ""
}

// Links returns the watched link names, sorted.
func (s *State) Links() []string {
	var names []string
	for n := range s.links {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Seed restores frozen deprecation lifetimes from a previously published digest,
// so an agent restart on an unchanged network republishes nothing.
func (s *State) Seed(n digest.Node) {
	for _, l := range n.Links {
		st := s.links[l.Name]
		if st == nil {
			continue
		}
		for _, p := range l.Prefixes {
			if p.Deprecated && p.Remaining > 0 {
				st.frozen[p.Prefix] = p.Remaining
			}
			// Believed before the restart: the kernel's addresses in it
			// count, no further than the digest said (seedCap).
			st.vouched[p.Prefix] = vouchSeed
			st.seeded[p.Prefix] = seedCap{deprecated: p.Deprecated, stated: p.Sources&digest.SourceRA != 0}
		}
	}
}

// RA takes one multicast Router Advertisement's prefixes from router at now
// (Heard).
func (s *State) RA(name string, router netip.Addr, now time.Time, prefixes []RAPrefix) bool {
	return s.Heard(name, router, now, prefixes, true)
}

// Heard takes one Router Advertisement's prefixes from router at now, sent to
// all nodes (multicast) or to this one: believed at once when they change
// nothing or Corroboration is off, else once corroborated (corroborate.go).
// An RA from a router the link's policy does not trust is not believed: it
// returns false and records only that an address spoke (untrusted).
func (s *State) Heard(name string, router netip.Addr, now time.Time, prefixes []RAPrefix, multicast bool) bool {
	l := s.links[name]
	if l == nil {
		return true
	}
	// A word stamped at now was read: so was everything that arrived
	// before it (reads.go), believed or not.
	l.read = later(l.read, now)
	if !s.policies[name].Trusts(router) {
		l.untrusted = later(l.untrusted, now) // not believed, but spoken (SetPolicies)
		return false
	}
	w := newWord(now, prefixes, s.OmitDeprecates)
	switch {
	case len(prefixes) == 0 && s.Corroboration <= 0:
		l.sawRA = true
	case s.Corroboration <= 0:
		s.believe(name, router, w, nil)
	default:
		s.corroborate(name, router, w, multicast)
	}
	return true
}

// believe records router's word w: ends, when not nil, are the lifetimes a
// corroborated proposal may have (the earliest any word carrying it stated).
func (s *State) believe(name string, router netip.Addr, w word, ends map[netip.Prefix]lifetimes) {
	l := s.links[name]
	now := w.at
	if _, ok := l.since[router]; !ok && len(l.since) < maxRouters {
		l.since[router] = now
	}
	l.sawRA = true
	for p, st := range w.states {
		if st.offered() {
			l.vouched[p] = vouchRA
		}
		k := raKey{p, router}
		if !st.offered() {
			delete(l.ra, k)
			continue
		}
		nl := lifetimes{valid: until(now, st.valid), preferred: until(now, st.preferred), stated: st, at: now}
		if e, ok := ends[p]; ok {
			nl.valid, nl.preferred = e.valid, e.preferred
		}
		if old, ok := l.ra[k]; ok && s.Corroboration > 0 {
			switch {
			case old.alike && st == old.stated:
				nl.alike = true // the router's ends move on as it re-sends them
			case !changes(old, true, st, now):
				// Ends within LifetimeSlack of the believed ones (a router
				// counting down): they creep no further than the first.
				nl.valid, nl.preferred, nl.alike = earlier(old.valid, nl.valid), earlier(old.preferred, nl.preferred), old.alike
			default:
				// Corroborated: the router states this now. The same
				// lifetimes as before, later: it re-sends them alike.
				nl.alike = st == old.stated && now.Sub(old.at) > LifetimeSlack
			}
		}
		l.ra[k] = nl
	}
	l.capRA(s.policies[name], now)
	// Only an RA that offers something (valid > 0) is the router's whole offer: one
	// that merely withdraws a prefix, or has none, deprecates nothing else.
	// Its router no longer mentions what it omits, though (complete).
	if !w.whole {
		for k, e := range l.ra {
			if _, ok := w.states[k.prefix]; w.complete && k.router == router && !ok && !e.omitted {
				e.omitted, e.alike = true, false
				l.ra[k] = e
			}
		}
		return
	}
	for k, e := range l.ra {
		if _, ok := w.states[k.prefix]; k.router != router || ok {
			continue
		}
		if !e.preferred.passed(now) {
			e.preferred = deadline(now)
		}
		// No longer mentioned, deprecated before or not: restating it is a
		// proposal. A replay of a router's old RA that changes nothing
		// preferred (one behind NPTv6, its global prefix deprecated beside a
		// ULA) refreshed the prefix it had dropped, and made it stand in
		// again (FuzzTwoRouters 4daaaf3b0e0a069d).
		e.omitted, e.alike = true, false
		l.ra[k] = e
	}
}

// Link records a link going down or coming up.
func (s *State) Link(name string, up bool, now time.Time) {
	l := s.links[name]
	if l == nil {
		return
	}
	if up == l.down {
		// Whatever the router said while the link was down went unheard,
		// and an empty socket would read as a window passed with nothing
		// contradicting it.
		s.forget(name, now, reportChanges)
	}
	if up && l.down {
		l.upAt = now
		// What was sent meanwhile went unheard: the next solicitation starts
		// the multicast bound afresh.
		l.firstAsked = time.Time{}
		for k, e := range l.addrs {
			if e.held {
				e.heldUntil = now.Add(s.LinkGrace)
				l.addrs[k] = e
			}
		}
	}
	l.down = !up
}

// SawRA reports whether every watched link has had at least one RA.
func (s *State) SawRA() bool {
	for _, l := range s.links {
		if !l.sawRA {
			return false
		}
	}
	return true
}

// Address records a kernel address being added/refreshed or removed.
func (s *State) Address(name string, a Address, removed bool, now time.Time) {
	l := s.links[name]
	if l == nil {
		return
	}
	if removed {
		e, ok := l.addrs[a.Addr.Addr()]
		switch {
		case !ok:
		case l.down || now.Before(l.upAt.Add(s.LinkGrace)):
			e.held, e.heldUntil = true, l.upAt.Add(s.LinkGrace)
			l.addrs[a.Addr.Addr()] = e
		default:
			delete(l.addrs, a.Addr.Addr())
		}
		return
	}
	l.capSeed(a, now)
	l.addrs[a.Addr.Addr()] = addrEntry{
		prefix:     a.Addr.Masked(),
		lifetimes:  lifetimes{valid: until(now, a.Valid), preferred: until(now, a.Preferred)},
		deprecated: a.Deprecated || a.Preferred == 0,
		permanent:  a.Permanent,
	}
}

// Delegated records a prefix delegated to the node, valid for valid
// (Infinite: until removed), or its removal. The node's DHCPv6 client holds
// the lease and installs the prefix as an unreachable route; it is reported
// on every link whose policy says Delegated, preferred until it expires.
func (s *State) Delegated(p netip.Prefix, valid time.Duration, removed bool, now time.Time) {
	if removed {
		delete(s.delegated, p)
		return
	}
	s.delegated[p] = until(now, valid)
}

// Delegating reports whether a prefix delegated to the node is held at now.
func (s *State) Delegating(now time.Time) bool {
	for _, valid := range s.delegated {
		if !valid.passed(now) {
			return true
		}
	}
	return false
}

// NextDeadline is the earliest time after now at which Snapshot could change
// without a new event (a lifetime running out), or false when nothing is pending.
func (s *State) NextDeadline(now time.Time) (time.Time, bool) {
	var next time.Time
	consider := func(d deadline) {
		if !d.never() && time.Time(d).After(now) && (next.IsZero() || time.Time(d).Before(next)) {
			next = time.Time(d)
		}
	}
	for _, d := range s.delegated {
		consider(d)
	}
	s.corroborationDeadlines(consider)
	s.answerDeadlines(consider)
	for _, l := range s.links {
		for _, e := range l.ra {
			consider(e.valid)
			consider(e.preferred)
		}
		for _, c := range l.seeded {
			if c.capped && !l.sawRA {
				consider(c.preferred) // Snapshot deprecates the seed there
			}
		}
		for _, a := range l.addrs {
			consider(a.lifetimes.valid)
			consider(a.lifetimes.preferred)
			if a.held && !l.down {
				consider(deadline(a.heldUntil))
			}
		}
	}
	return next, !next.IsZero()
}

// Routers returns the routers whose RAs currently carry p on a link, sorted.
func (s *State) Routers(name string, p netip.Prefix) []netip.Addr {
	l := s.links[name]
	if l == nil {
		return nil
	}
	var rs []netip.Addr
	for k := range l.ra {
		if k.prefix == p {
			rs = append(rs, k.router)
		}
	}
	slices.SortFunc(rs, netip.Addr.Compare)
	return rs
}
