package observe

import (
	"net/netip"
	"time"

	"github.com/renumber/renumber/internal/digest"
)

// The model's kernel and agent restarts (FuzzCorroboration).
//
// The kernel forms and updates a SLAAC address from every RA that reaches
// the host - the router's, the adversary's, a replay, believed or not, read
// by the listener or dropped from its socket's queue - as RFC 4862 5.5.3 e
// says: the preferred lifetime is the RA's; the valid lifetime is the RA's
// when above two hours or above what is left, else left alone (two hours
// when more was left); a prefix an RA omits is not touched at all. Each
// change is reported to the agent (a netlink address event).
//
// The fuzzer may restart the agent: a new State, seeded with the digest the
// last one published (it publishes once its link believed an RA; before
// that the Node keeps the digest of the one before), told the kernel's
// addresses (the listing at start), its listener soliciting - at once, or
// after it was down a while the fuzzer chooses (up to an hour: goDown),
// the router renumbering and the adversary speaking meanwhile unheard. The
// memory it restarts on is the last the agent wrote: its writes may fail
// (a full /var), leaving an older one.
//
// After every step the digest Snapshot returns is checked too: a prefix is
// reported preferred only if the agent believes a router's RA that keeps it
// preferred (the RA table, itself checked against the router) - or, before
// the link's first believed RA since a restart, if the seed carried it
// preferred, the kernel's address in it, as listed at the restart, is still
// preferred (seedCap), and the router's own statements keep it preferred.
// And, once the agent publishes after a restart, a prefix its last digest
// carried deprecated is preferred only on a word believed since.

// kernelAddr is the kernel's SLAAC address in one prefix.
type kernelAddr struct{ valid, preferred deadline }

// twoHours is RFC 4862 5.5.3 e's floor on an RA's word shortening a
// valid lifetime.
const twoHours = 2 * time.Hour

// kernelHears applies one RA's prefix options to the kernel's addresses at
// now and reports each change to the agent.
func (m *model) kernelHears(link string, ps []RAPrefix) {
	if link != "eth0" {
		return // the second link's addresses are not modelled (routers_model_test.go)
	}
	if m.kernel == nil {
		m.kernel = map[netip.Prefix]kernelAddr{}
	}
	m.kernelExpire()
	for _, p := range ps {
		if !p.Autonomous || p.Prefix.Bits() != 64 || p.Preferred > p.Valid {
			continue
		}
		a, ok := m.kernel[p.Prefix]
		switch {
		case !ok && p.Valid == 0:
			continue
		case !ok:
			a.valid = until(m.now, p.Valid)
		default:
			if left := a.valid.remaining(m.now); p.Valid > twoHours || p.Valid > left {
				a.valid = until(m.now, p.Valid)
			} else if left > twoHours {
				a.valid = until(m.now, twoHours)
			}
		}
		a.preferred = until(m.now, p.Preferred)
		m.kernel[p.Prefix] = a
		m.kernelReports(p.Prefix, a)
	}
}

// kernelExpire removes the addresses whose valid lifetime ran out.
func (m *model) kernelExpire() {
	for p, a := range m.kernel {
		if a.valid.passed(m.now) {
			delete(m.kernel, p)
			m.both(func(s *State) { s.Address("eth0", Address{Addr: addr(p, 1)}, true, m.now) })
		}
	}
}

func (m *model) kernelReports(p netip.Prefix, a kernelAddr) {
	pref := a.preferred.remaining(m.now)
	m.both(func(s *State) {
		s.Address("eth0", Address{Addr: addr(p, 1), Valid: a.valid.remaining(m.now), Preferred: pref, Deprecated: pref == 0}, false, m.now)
	})
}

// restart: the agent process restarts at now.
func (m *model) restart() {
	m.tracef("agent restarts, seeded with %v and its memory of %v", m.published, m.memory.At)
	old := m.s
	switch {
	case !m.quiet():
		m.shadow = nil
	case m.shadow == nil:
		m.shadow, m.restartAt = old, m.now // the agent that did not restart (quietrestart_test.go)
	}
	s := New(m.links()...)
	s.AwaitReads, s.OmitDeprecates, s.RouterMinDelay, s.ConflictBound = old.AwaitReads, old.OmitDeprecates, old.RouterMinDelay, old.ConflictBound
	s.SetPolicies(old.policies)
	s.Seed(m.published)
	s.Remember(m.memory, m.now)
	m.s = s
	m.restarted, m.restartedAt = true, m.now
	m.counted = nil // a new process counts from zero
	m.restartMemory = m.memory.At
	m.deprecatedBefore = map[linkPrefix]bool{}
	for _, l := range m.published.Links {
		for _, dp := range l.Prefixes {
			if dp.Deprecated {
				m.deprecatedBefore[linkPrefix{l.Name, dp.Prefix}] = true
			}
		}
	}
	// What the old process's socket held unread is gone with it.
	m.unread, m.lostAt, m.drop, m.gap = nil, time.Time{}, 0, time.Time{}
	m.forgetConflicts()
	m.kernelExpire()
	m.seededPreferred = map[netip.Prefix]deadline{}
	for p, a := range m.kernel {
		m.kernelReports(p, a)
		for _, l := range m.published.Links {
			for _, dp := range l.Prefixes {
				if l.Name == "eth0" && dp.Prefix == p && !dp.Deprecated { // the kernel's link
					m.seededPreferred[p] = a.preferred
				}
			}
		}
	}
	m.reopened = m.now
	m.now = m.now.Add(time.Nanosecond) // the listener solicits as it starts
	for _, name := range m.links() {
		m.sendSolicitation(name)
	}
	m.postpone()
}

// goDown: the agent process stops at now and restarts after down (a node
// rebooted, a rollout, a crash loop): what the router and the adversary
// say meanwhile is heard by the kernel alone, the agent publishes and
// writes nothing, and the restart finds the memory it wrote last.
func (m *model) goDown(down time.Duration) {
	m.tracef("agent goes down for %s", down)
	m.closeSocket(max(down, time.Millisecond))
	m.down = true
}

// checkDigest asserts the digest's safety at now (the comment above).
func (m *model) checkDigest(n digest.Node) {
	l := m.s.links["eth0"]
	if m.down {
		return // the process is gone: it publishes and writes nothing
	}
	if l.sawRA {
		m.published = n
	}
	// The agent writes its memory when it moved (agent/memory.go), unless
	// its writes fail.
	if mem := m.s.Memory(m.now); !m.memoryStuck && mem.Moved(m.memory, MemoryQuantum) {
		m.memory = mem
	}
	for _, dl := range n.Links {
		l := m.s.links[dl.Name]
		for _, dp := range dl.Prefixes {
			if dp.Deprecated {
				continue
			}
			if m.keepOmitted && dp.Sources&digest.SourceRA != 0 {
				continue // open: the RA table's own check skips what the spoofer may add
			}
			believed := false
			for k, e := range l.ra {
				believed = believed || k.prefix == dp.Prefix && !e.preferred.passed(m.now)
				// A prefix the digest carried deprecated at the restart is
				// preferred again only on a word believed since.
				// (What the agent publishes: once a word is believed, or
				// its startup grace ran out, twice 10 s at most.)
				if k.prefix == dp.Prefix && !e.preferred.passed(m.now) && m.deprecatedBefore[linkPrefix{dl.Name, dp.Prefix}] && e.at.Before(m.restartedAt) &&
					(l.sawRA || !m.now.Before(m.restartedAt.Add(2*modelGrace))) {
					m.fail("reports %s preferred on a word of +%s, before the restart at +%s; the digest then carried it deprecated",
						dp.Prefix, e.at.Sub(t0), m.restartedAt.Sub(t0))
				}
			}
			end, seeded := m.seededPreferred[dp.Prefix]
			seeded = seeded && dl.Name == "eth0" // the kernel's link
			if believed || m.restarted && !l.sawRA && seeded && !end.passed(m.now) && m.statesPreferred(dp.Prefix) {
				continue
			}
			if m.standsIn(dl.Name, dp.Prefix) {
				continue // FuzzTwoRouters' followDeprecated (routers_model_test.go)
			}
			if m.keepOmitted && m.restarted && !l.sawRA && seeded && !end.passed(m.now) {
				// Open, across a restart: what the spoofer added was
				// published from the RA table (skipped above), and a
				// memory whose writes failed does not hold it, so the
				// seed's rule carries it as any prefix the digest
				// carried preferred (FuzzCorroboration 80244744baf0d960).
				continue
			}
			if seeded {
				m.fail("reports %s preferred (sources %v), which no believed RA keeps preferred; seeded preferred, its address preferred until %v at the restart, the router's statements keep it preferred: %v",
					dp.Prefix, dp.Sources, m.at(end), m.statesPreferred(dp.Prefix))
			}
			m.fail("reports %s preferred (sources %v), which no believed RA keeps preferred (restarted: %v)", dp.Prefix, dp.Sources, m.restarted)
		}
	}
}

// statesPreferred reports whether the router's statements of p keep it
// preferred at now (LifetimeSlack), as check reckons them. (A preferred
// lifetime that never ends is stated with an infinite valid one: offers
// state preferred no longer than valid.)
func (m *model) statesPreferred(p netip.Prefix) bool {
	_, prefBy, _, statedPreferred, _ := m.statements(p)
	return statedPreferred && !m.now.After(prefBy.Add(LifetimeSlack))
}

// replaysAcrossARestart: the router renumbers A to B omitting A; a spoofer
// replays the router's RA offering A every 5 s, holding the renumbering
// back (and the kernel's address in A preferred); the agent restarts 20
// minutes in, seeded with A preferred, and the replays go on for 50 more.
func replaysAcrossARestart() []byte {
	in := []byte{0, 0, 10, 0, 7, 60, 0, 0x16}
	replays := func(n int) {
		for range n {
			in = append(in, 250, 3, 0) // 5 s later, a replay of the router's first RA
		}
	}
	replays(240)
	in = append(in, 0, 0x4d)
	replays(600)
	return in
}
