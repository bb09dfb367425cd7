// Snapshot: what the links hold, folded into the digest the agent publishes -
// one entry per prefix and link, its sources, preferred or deprecated, and the
// valid lifetime left frozen when it turns deprecated; the links' policies
// refuse what they do not follow, and a digest past digest.MaxPrefixes drops
// deprecated prefixes first (evictionOrder).

package observe

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/renumber/renumber/internal/digest"
)

// Rejected is a prefix seen on a link that the link's policy refused.
type Rejected struct {
	Link   string
	Prefix netip.Prefix
	Reason error
}

type seen struct {
	sources       digest.Source
	pdRemaining   time.Duration // a delegation's valid lifetime left
	raPreferred   bool          // some router's preferred lifetime runs
	addrPreferred bool          // some address is preferred
	slaac         bool          // some address may be SLAAC's: a /64 the kernel does not mark permanent
	raRemaining   time.Duration // longest valid lifetime left by a router's RA
	addrRemaining time.Duration // longest valid lifetime left of an address
}

// preferred: routers decide when any advertises the prefix, addresses otherwise.
func (e *seen) preferred() bool {
	if e.sources&digest.SourcePD != 0 {
		return true // a delegation has one lifetime: preferred until it ends
	}
	if e.sources&digest.SourceRA != 0 {
		return e.raPreferred
	}
	return e.addrPreferred
}

// remaining: routers decide here too. The kernel does not shorten an address's
// valid lifetime below two hours on an RA's word (RFC 4862 5.5.3 e), but the
// router's last word is what the prefix has left on the network.
func (e *seen) remaining() time.Duration {
	if e.sources&digest.SourcePD != 0 {
		return e.pdRemaining
	}
	if e.sources&digest.SourceRA != 0 {
		return e.raRemaining
	}
	return e.addrRemaining
}

// Snapshot expires what ran out by now and returns the digest of what is left,
// with the prefixes the links' policies refused. Prefixes beyond digest.MaxPrefixes
// (less the Reserve) are dropped, deprecated ones first, and listed in Rejected.
func (s *State) Snapshot(now time.Time) (digest.Node, []Rejected) {
	var out digest.Node
	var rejected []Rejected
	var all []*digest.Prefix
	for p, valid := range s.delegated {
		if valid.passed(now) {
			delete(s.delegated, p)
		}
	}
	s.Settle(now)
	for _, name := range s.Links() {
		l := s.links[name]
		byPrefix := map[netip.Prefix]*seen{}
		get := func(p netip.Prefix) *seen {
			if byPrefix[p] == nil {
				byPrefix[p] = &seen{}
			}
			return byPrefix[p]
		}
		for k, lt := range l.ra {
			if lt.valid.passed(now) {
				delete(l.ra, k)
				continue
			}
			e := get(k.prefix)
			e.sources |= digest.SourceRA
			e.raPreferred = e.raPreferred || !lt.preferred.passed(now)
			e.raRemaining = max(e.raRemaining, lt.valid.remaining(now))
		}
		for addr, a := range l.addrs {
			if a.lifetimes.valid.passed(now) || (a.held && !l.down && !now.Before(a.heldUntil)) {
				delete(l.addrs, addr)
				continue
			}
			e := get(a.prefix)
			if e.sources&digest.SourceRA == 0 {
				// Routers decide: a prefix a router advertises is reported as such,
				// with or without an address in it. The kernel announces a SLAAC
				// address only after DAD (2 s): reporting it would be a second
				// write per change, or a 2 s wait for one.
				e.sources |= digest.SourceAddr
			}
			preferred, slaac := !a.deprecated && !a.lifetimes.preferred.passed(now), a.prefix.Bits() == 64 && !a.permanent
			if slaac && s.Corroboration > 0 {
				// The kernel keeps a SLAAC address preferred on any RA's word, a
				// replay's of the router's old one included, and never
				// deprecates a prefix its router merely omits: once no believed
				// RA states the prefix, its addresses keep it reported, never
				// preferred beyond what the router stated - nor, after a
				// restart, beyond what the last digest said (seedCap).
				switch l.vouched[a.prefix] {
				case vouchRA:
					preferred = false
				case vouchSeed:
					preferred = preferred && l.seedPreferred(a.prefix, now)
				}
			}
			e.addrPreferred = e.addrPreferred || preferred
			e.slaac = e.slaac || slaac
			e.addrRemaining = max(e.addrRemaining, a.lifetimes.valid.remaining(now))
		}
		if s.policies[name].Delegated {
			for p, valid := range s.delegated {
				e := get(p)
				e.sources |= digest.SourcePD
				e.pdRemaining = max(e.pdRemaining, valid.remaining(now))
			}
		}
		if p, ok := s.standIn(name, l, byPrefix, now); ok {
			byPrefix[p].raPreferred = true
		}
		dl := digest.Link{Name: name, Conflict: len(s.Conflicts(name, now)) > 0}
		for p, e := range byPrefix {
			if r := s.untrusted(name, l, p, e.sources); r != nil {
				rejected = append(rejected, *r)
				continue
			}
			if e.sources == digest.SourceAddr && e.slaac && s.Corroboration > 0 && !l.vouchedFor(p) {
				if l.proposed(p) {
					continue // formed from an RA under corroboration: it waits too
				}
				rejected = append(rejected, Rejected{Link: name, Prefix: p, Reason: ErrUncorroborated})
				continue
			}
			if err := s.policies[name].Check(name, p); err != nil {
				rejected = append(rejected, Rejected{Link: name, Prefix: p, Reason: err})
				continue
			}
			dp := digest.Prefix{Prefix: p, Sources: e.sources, Deprecated: !e.preferred()}
			if dp.Deprecated {
				if _, ok := l.frozen[p]; !ok {
					l.frozen[p] = min(e.remaining(), digest.MaxLifetime*time.Second).Truncate(time.Second)
				}
				dp.Remaining = l.frozen[p]
			} else {
				delete(l.frozen, p)
			}
			dl.Prefixes = append(dl.Prefixes, dp)
		}
		for p := range l.frozen {
			if byPrefix[p] == nil {
				delete(l.frozen, p)
			}
		}
		for p := range l.vouched {
			if byPrefix[p] == nil {
				delete(l.vouched, p)
				delete(l.seeded, p)
			}
		}
		advertising := map[netip.Addr]bool{}
		for k := range l.ra {
			advertising[k.router] = true
		}
		for r := range l.since {
			if !advertising[r] {
				delete(l.since, r)
			}
		}
		out.Links = append(out.Links, dl)
	}
	out = out.Canonical()
	for i := range out.Links {
		for j := range out.Links[i].Prefixes {
			all = append(all, &out.Links[i].Prefixes[j])
		}
	}
	if limit := max(digest.MaxPrefixes-s.Reserve, 0); len(all) > limit {
		s.evictionOrder(out, all, now)
		drop := map[*digest.Prefix]bool{}
		for _, p := range all[limit:] {
			drop[p] = true
		}
		for i := range out.Links {
			l := &out.Links[i]
			kept := l.Prefixes[:0:0]
			for j := range l.Prefixes {
				if drop[&l.Prefixes[j]] {
					rejected = append(rejected, Rejected{Link: l.Name, Prefix: l.Prefixes[j].Prefix, Reason: ErrTooMany})
					continue
				}
				kept = append(kept, l.Prefixes[j])
			}
			l.Prefixes = kept
		}
	}
	for _, dl := range out.Links {
		if l := s.links[dl.Name]; l != nil {
			l.kept = map[netip.Prefix]bool{}
			for _, p := range dl.Prefixes {
				l.kept[p.Prefix] = true
			}
		}
	}
	slices.SortFunc(rejected, func(a, b Rejected) int {
		return cmp.Or(cmp.Compare(a.Link, b.Link), digest.ComparePrefix(a.Prefix, b.Prefix))
	})
	return out, rejected
}

// linkPrefix is a prefix on a link.
type linkPrefix struct {
	link   string
	prefix netip.Prefix
}

// remainingNow is the valid lifetime each prefix has left on each link at
// now, as Snapshot reckons it (seen.remaining). Only the eviction needs it,
// so Snapshot's common path does not pay for it.
func (s *State) remainingNow(now time.Time) map[linkPrefix]time.Duration {
	seenAt := map[linkPrefix]*seen{}
	get := func(k linkPrefix) *seen {
		if seenAt[k] == nil {
			seenAt[k] = &seen{}
		}
		return seenAt[k]
	}
	for name, l := range s.links {
		for k, lt := range l.ra {
			e := get(linkPrefix{name, k.prefix})
			e.sources |= digest.SourceRA
			e.raRemaining = max(e.raRemaining, lt.valid.remaining(now))
		}
		for _, a := range l.addrs {
			e := get(linkPrefix{name, a.prefix})
			e.addrRemaining = max(e.addrRemaining, a.lifetimes.valid.remaining(now))
		}
		if s.policies[name].Delegated {
			for p, valid := range s.delegated {
				e := get(linkPrefix{name, p})
				e.sources |= digest.SourcePD
				e.pdRemaining = valid.remaining(now)
			}
		}
	}
	out := make(map[linkPrefix]time.Duration, len(seenAt))
	for k, e := range seenAt {
		out[k] = e.remaining()
	}
	return out
}

// maxRouters bounds the routers whose seniority a link remembers: sources are
// whatever a host on the link puts in its packets.
const maxRouters = 64

// evictionOrder sorts all (pointers into out) by what the digest keeps first
// when more prefixes are seen than it may hold: a trusted router's prefixes
// (trustedRouters), then each router's by seniority - the router heard first
// on the link first, so a host that starts flooding fresh prefixes crowds out
// neither the current prefix, nor a real renumbering from the home router,
// nor what still drains; a prefix only the kernel reports ranks with the
// senior routers. Within a router, preferred before deprecated; then what the
// last digest carried (a full digest does not churn, and prefixes offered
// later with longer lifetimes do not push out one that still drains); then
// the most valid lifetime left now first (the one closest to expiry goes
// first: after a burst of renumberings, the oldest; the digest's frozen
// lifetimes say only what was left at each deprecation); then by address.
func (s *State) evictionOrder(out digest.Node, all []*digest.Prefix, now time.Time) {
	left := s.remainingNow(now)
	type key struct {
		trusted bool
		since   time.Time
	}
	ranks := map[*digest.Prefix]key{}
	fresh := map[*digest.Prefix]bool{}
	remaining := map[*digest.Prefix]time.Duration{}
	for i := range out.Links {
		name := out.Links[i].Name
		l := s.links[name]
		pol := s.policies[name]
		for j := range out.Links[i].Prefixes {
			p := &out.Links[i].Prefixes[j]
			routers := s.Routers(name, p.Prefix)
			k := key{since: now.Add(time.Hour)} // a router not remembered: the most junior
			if len(routers) == 0 {
				k.since = time.Time{} // the kernel's alone: as senior as it gets
			}
			for _, r := range routers {
				k.trusted = k.trusted || (pol.Trusted != nil && pol.Trusts(r))
				if t, ok := l.since[r]; ok && t.Before(k.since) {
					k.since = t
				}
			}
			ranks[p] = k
			remaining[p] = left[linkPrefix{name, p.Prefix}]
			if !l.kept[p.Prefix] {
				fresh[p] = true
			}
		}
	}
	slices.SortStableFunc(all, func(a, b *digest.Prefix) int {
		ka, kb := ranks[a], ranks[b]
		return cmp.Or(compareBool(!ka.trusted, !kb.trusted), ka.since.Compare(kb.since),
			compareBool(a.Deprecated, b.Deprecated), compareBool(fresh[a], fresh[b]),
			cmp.Compare(remaining[b], remaining[a]), digest.ComparePrefix(a.Prefix, b.Prefix))
	})
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
