package observe

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
)

// The model's wider worlds (FuzzTwoRouters): the model of model_test.go,
// with a second conforming router, on the same link or on a second one,
// and a --conflict-bound, chosen by the input's first byte (world).
//
// The second router (routerB) has its own link-local address, its own
// prefixes (its own, a ULA, and one of routerA's pool: two routers
// advertising one prefix), its own answer mode and interval; it renumbers
// when the fuzzer says, as routerA does. On the same link it is the home's
// second router (the ISP's and a ULA-advertising one; radvd twice); on
// eth1 it is that link's only router. The adversary may speak from either
// router's address, on that router's link, and replay either router's RAs.
//
// After every step, per router: everything believed of its address on its
// link is something it stated (the lifetimes no later than its own); its
// offer is believed within landing of its first RA and stays believed while
// no adversary word from its address, no drop, no restart or reopen
// followed (a word from the other router's address, or said on the other
// link, does not excuse it; checked for the second router, routerA's
// renumberings as in model_test.go); a word of one link is never believed
// on the other. And with a bound: a prefix believed preferred of a router's
// address on a word from before the agent counted a contradiction on that
// address is no longer preferred once the bound ran out (docs/security.md,
// --conflict-bound): only a word believed since keeps it preferred.
// A word from either router's address contradicting that router's offer
// is reported as a conflict of that address within landing. The second
// link's kernel addresses are not modelled.

// world is what the input's first byte chooses (FuzzTwoRouters).
type world struct {
	// second: the second router's link ("": none).
	second string
	// bound: the agent's --conflict-bound.
	bound time.Duration
	// secondUnicast, secondInterval: how the second router answers, and
	// how often it multicasts its offer.
	secondUnicast  bool
	secondInterval time.Duration
	// follow: the links follow a deprecated prefix (followDeprecated),
	// and the second router is a home router behind NPTv6: it advertises
	// its global prefix deprecated beside a preferred ULA.
	follow bool
}

// worldOf reads a world from b: bits 0-1 where the second router is (none,
// eth0, eth1, eth0), bits 2-3 the bound (0, 30 s, 2 min, 5 min), bit 4
// whether the second router unicasts its answers, bits 5-6 its interval
// (3, 19, 35 or 51 s), bit 7 followDeprecated.
func worldOf(b byte) world {
	w := world{
		second:         []string{"", "eth0", "eth1", "eth0"}[b&3],
		bound:          []time.Duration{0, 30 * time.Second, 2 * time.Minute, 5 * time.Minute}[b>>2&3],
		secondUnicast:  b&0x10 != 0,
		secondInterval: MinDelayBetweenRAs + time.Duration(b>>5&3)*16*time.Second,
		follow:         b&0x80 != 0,
	}
	return w
}

// links is the links the agent watches in w.
func (w world) links() []string {
	if w.second == "eth1" {
		return []string{"eth0", "eth1"}
	}
	return []string{"eth0"}
}

// secondPool is the second router's pool: its own prefixes, a ULA (which
// the links' policy, GlobalOnly, leaves out of the digest), and one of
// routerA's. Behind NPTv6 it advertises nptULA beside its global prefix.
var (
	nptULA     = netip.MustParsePrefix("fd00:b::/64")
	secondPool = []netip.Prefix{
		netip.MustParsePrefix("2001:db8:e::/64"), nptULA,
		netip.MustParsePrefix("2001:db8:f::/64"), netip.MustParsePrefix("2001:db8:c::/64"),
	}
)

// secondRouter is w's second router, about to multicast its first offer.
func (w world) secondRouter() *modelRouter {
	if w.second == "" {
		return nil
	}
	r := &modelRouter{
		addr:         routerB,
		link:         w.second,
		pool:         secondPool,
		unicast:      w.secondUnicast,
		wasUnicast:   w.secondUnicast,
		interval:     w.secondInterval,
		minDelay:     MinDelayBetweenRAs,
		offers:       []*routerOffer{{prefixes: []RAPrefix{{Prefix: secondPool[0], Valid: time.Hour, Preferred: 30 * time.Minute, Autonomous: true}}}},
		nextPeriodic: t0.Add(500 * time.Millisecond),
	}
	if w.follow {
		r.npt = true
		r.pool = slices.DeleteFunc(slices.Clone(secondPool), func(p netip.Prefix) bool { return p == nptULA })
		r.offers[0].prefixes = r.nptOffer(r.pool[0])
	}
	return r
}

// nptOffer is what a router behind NPTv6 advertises: its global prefix
// deprecated, a ULA preferred.
func (r *modelRouter) nptOffer(global netip.Prefix) []RAPrefix {
	return []RAPrefix{
		{Prefix: global, Valid: time.Hour, Autonomous: true},
		{Prefix: nptULA, Valid: time.Hour, Preferred: 30 * time.Minute, Autonomous: true},
	}
}

// standsIn reports whether p, reported preferred on link name with no
// believed RA keeping it preferred, may be the link's stand-in
// (standin.go): the links follow a deprecated prefix, no router is
// believed to prefer a prefix the link accepts, and a router is believed
// to advertise p valid (what it states, as check asserts).
func (m *model) standsIn(name string, p netip.Prefix) bool {
	if !m.follow {
		return false
	}
	l, valid := m.s.links[name], false
	for k, e := range l.ra {
		if m.s.policies[name].Check(name, k.prefix) == nil && !e.preferred.passed(m.now) {
			return false
		}
		valid = valid || k.prefix == p && !e.valid.passed(m.now)
	}
	return valid
}

// routers is the model's routers, routerA first.
func (m *model) routers() []*modelRouter {
	if m.b == nil {
		return []*modelRouter{m.r}
	}
	return []*modelRouter{m.r, m.b}
}

// links is the links the agent watches.
func (m *model) links() []string {
	if m.b != nil && m.b.link != m.r.link {
		return []string{m.r.link, m.b.link}
	}
	return []string{m.r.link}
}

// router is the model's router at addr on link (nil: none).
func (m *model) router(link string, addr netip.Addr) *modelRouter {
	for _, r := range m.routers() {
		if r.link == link && r.addr == addr {
			return r
		}
	}
	return nil
}

// setPolicies gives routerA's link pol, the second router still trusted
// where pol names routers, and eth1 the default.
func (m *model) setPolicies(pol policy.Policy) {
	if m.b != nil && m.b.link == m.r.link && len(pol.Trusted) > 0 {
		pol.Trusted = append(slices.Clip(pol.Trusted), m.b.addr)
	}
	pol.FollowDeprecated = m.follow
	pols := map[string]policy.Policy{m.r.link: pol}
	for _, name := range m.links()[1:] {
		pols[name] = policy.Policy{GlobalOnly: true, FollowDeprecated: m.follow}
	}
	m.s.SetPolicies(pols)
}

// postpone: the agent forgot what was pending (a reopen, a restart): each
// renumbering to check lands within landing of now.
func (m *model) postpone() {
	for _, r := range m.routers() {
		if !r.land.IsZero() {
			r.land = later(r.land, m.now.Add(m.landing()))
		}
	}
}

// forgetConflicts: the agent forgot what was pending (a closed socket, a
// restart): no contradiction said before is owed.
func (m *model) forgetConflicts() {
	for _, r := range m.routers() {
		r.conflictBy = time.Time{}
	}
}

// checkSecondLands checks the second router's offer at every step, not
// only at its renumbering's land: once its offer was first sent landing
// ago, and since then the adversary did not speak from its address (or
// the router sent an RA since it last did: a contradiction drops what was
// pending, and nothing is put to the router again until it speaks), no
// word was dropped (its renumbering, perhaps, said again only at its next
// interval), the agent did not restart nor reopen its socket, what it
// believes of the second router's address is that offer - whatever was
// said from routerA's address, or on the other link.
func (m *model) checkSecondLands() {
	r := m.b
	if r == nil || m.down {
		return
	}
	o := r.stating()
	if o.first.IsZero() {
		return
	}
	if !r.spokenAt.IsZero() && r.resaid.IsZero() {
		return // a contradiction leaves nothing pending: its next RA puts it again
	}
	from := later(o.first, r.resaid)
	if !m.droppedAt.IsZero() {
		from = later(from, m.droppedAt.Add(r.interval))
	}
	from = later(from, m.reopened)
	due := from.Add(m.landing())
	if m.keepOmitted {
		// A change set aside behind the adversary's last word (one that
		// neither carries nor contradicts it: no RA is a whole offer)
		// comes again only with the router's next RA.
		due = due.Add(r.interval)
	}
	if !m.now.Before(due) {
		m.landed(r, m.s.links[r.link])
	}
	if !r.land.IsZero() && !m.now.Before(r.land) {
		r.land = time.Time{}
	}
}

// doubtKey is a router's address on a link.
type doubtKey struct {
	link string
	addr netip.Addr
}

// doubtTimes: when the agent counted contradictions on one address.
type doubtTimes struct {
	until time.Time // the speaker's conflictUntil last seen
	at    []contradiction
}

// contradiction: one counted, stamped with its word's arrival (at), seen
// counted at seen.
type contradiction struct{ at, seen time.Time }

// contradictions: the links' contradiction counts last seen (checkBound).
type contradictions map[string]uint64

// checkBound asserts the conflict bound at now (the comment above).
func (m *model) checkBound() {
	if m.s.ConflictBound <= 0 {
		return
	}
	if m.doubts == nil {
		m.doubts = map[doubtKey]*doubtTimes{}
	}
	if m.counted == nil {
		m.counted = contradictions{}
	}
	for _, name := range m.links() {
		l := m.s.links[name]
		// A contradiction on an address is counted, and sets its conflict
		// to run out ConflictHold after it: the time it was counted,
		// exactly. (A drop reports a conflict too, from its own time,
		// and counts none: no word was contradicted, nothing is doubted.)
		counted := l.contradictions > m.counted[name]
		m.counted[name] = l.contradictions
		for addr, sp := range l.speakers {
			k := doubtKey{name, addr}
			d := m.doubts[k]
			if d == nil {
				d = &doubtTimes{}
				m.doubts[k] = d
			}
			if c := sp.conflictUntil.Add(-m.s.ConflictHold); counted && !sp.conflictUntil.IsZero() && !sp.conflictUntil.Equal(d.until) && !m.lostTimes[c] {
				d.at = append(d.at, contradiction{c, m.now})
			}
			d.until = sp.conflictUntil
		}
		for k, e := range l.ra {
			if e.preferred.passed(m.now) {
				continue
			}
			d := m.doubts[doubtKey{name, k.router}]
			if d == nil {
				continue
			}
			i := slices.IndexFunc(d.at, func(c contradiction) bool { return c.at.After(e.at) && m.remembers(c) })
			if i < 0 {
				continue
			}
			c := d.at[i].at
			end := c.Add(m.s.ConflictBound)
			if m.restarted && m.restartedAt.After(c) {
				// The memory puts a doubted word back preferred no longer
				// than the bound past the restart (docs/security.md).
				end = later(end, m.restartedAt.Add(m.s.ConflictBound))
			}
			if !m.now.Before(end.Add(LifetimeSlack)) {
				m.fail("believes %s of %s on %s preferred (until %v) on its word of +%s, contradicted at +%s: past the conflict bound %s",
					k.prefix, k.router, name, m.at(e.preferred), e.at.Sub(t0), c.Sub(t0), m.s.ConflictBound)
			}
		}
	}
}

// remembers reports whether the agent running now knows of contradiction
// c: counted since its last restart, or written in the memory that restart
// put back (the memory is written, when it moved, after each step). A
// memory whose writes failed since puts the words back as it last wrote
// them, not doubted: the bound then counts from the next contradiction.
func (m *model) remembers(c contradiction) bool {
	return !m.restarted || !c.seen.Before(m.restartedAt) || !m.restartMemory.Before(c.seen)
}

// FuzzTwoRouters plays the model in the world its input's first byte
// chooses (worldOf): a second router on the same link or on another, a
// conflict bound. A target of its own so that FuzzCorroboration's corpus
// keeps its meaning, and every input here plays a wider world.
func FuzzTwoRouters(f *testing.F) {
	// The second router on eth0 (multicasting every 19 s) renumbers
	// (0x06, who 1: routerB); the adversary, from routerA's address,
	// offers the second router's first prefix, then from routerB's
	// address offers routerA's.
	f.Add([]byte{0x41, 40, 0, 10, 0, 7, 60, 0, 6, 1, 0, 7, 60, 0, 0, 0, 1, 25, 6, 0, 7, 60, 0, 0, 1, 1, 25, 0, 0, 7, 90})
	// The same with the second router on eth1.
	f.Add([]byte{0x42, 40, 0, 10, 0, 7, 60, 0, 6, 1, 0, 7, 60, 0, 0, 0, 1, 25, 6, 0, 7, 60, 0, 0, 1, 1, 25, 0, 0, 7, 90})
	// A 30 s bound, one router: it renumbers A to B omitting A, and a
	// spoofer replays its first RA every 5 s for five minutes.
	f.Add(append([]byte{0x04, 1, 0, 10, 0, 7, 60, 0, 0x16, 0, 7, 60}, slices.Repeat([]byte{250, 3, 0}, 60)...))
	// A 2 min bound and the second router on eth0, unicasting: a spoofer
	// contradicts routerA, then routerB, then replays routerB's first RA
	// from its address.
	f.Add([]byte{0x19, 1, 0, 10, 0, 7, 60, 0, 0, 0, 1, 25, 4, 0, 7, 30, 0, 0, 1, 1, 25, 4, 0, 7, 30, 0, 3, 3, 0, 0, 7, 200})
	// A 30 s bound and the second router on eth0: a spoofer contradicts
	// routerA once; the second router's offer, never contradicted, stays
	// preferred.
	f.Add([]byte{0x05, 1, 0, 10, 0, 7, 60, 0, 0, 0, 1, 25, 4, 0, 7, 200, 0, 7, 200})
	// A 5 min bound, the second router on eth1: a spoofer contradicts it,
	// the agent restarts, its listener reopens.
	f.Add([]byte{0x0e, 0xfe, 0, 10, 0, 7, 60, 0, 0, 1, 1, 25, 4, 0, 0x4d, 0, 0, 7, 60, 0, 0x45, 0, 9, 0, 7, 120})
	// followDeprecated, the second router behind NPTv6 on eth0 (its global
	// prefix deprecated beside a ULA), heard first: routerA withdraws its
	// prefix, so the second router's stands in; a spoofer adds pX
	// deprecated and valid for ever from routerA's address, then from the
	// second router's (issue 42's first hole): it never stands in.
	f.Add([]byte{0x81, 1, 0, 100, 0, 7, 60, 0, 0x66, 0, 0, 7, 60, 0, 0, 0, 1, 6, 4, 0, 7, 60, 0, 0, 1, 1, 6, 4, 0, 7, 90})
	f.Fuzz(func(t *testing.T, input []byte) {
		if len(input) == 0 {
			return
		}
		runWorld(t, worldOf(input[0]), input[1:])
	})
}
