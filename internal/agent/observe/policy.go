package observe

import (
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// ErrUntrusted marks a prefix only the kernel reports on a link whose
// DynamicPrefixes trust some routers, and that none of them advertised.
var ErrUntrusted = errors.New("observe: no trusted router advertised it")

// SetPolicies sets each watched link's policy (a link without one has the
// zero Policy: everything is reported). A router a link no longer trusts
// (dropped from trustedRouters while the agent runs) is forgotten there:
// its believed words (else reported, source ra, until the lifetimes it
// stated, for ever if infinite, and written to the memory for the next
// run), its proposals waiting (believed once their window passed), its
// seniority and how it answers. What the kernel formed from its RAs stays
// reported as any address the router's word once vouched for: never
// preferred.
func (s *State) SetPolicies(p map[string]policy.Policy) {
	old := s.policies
	s.policies = p
	for name, l := range s.links {
		pol := p[name]
		if !slices.Equal(old[name].Trusted, pol.Trusted) {
			// An address trusted now may have spoken while it was not,
			// unread - its answer to the last solicitation among its
			// words: a word from it after that is no answer to that
			// solicitation (voiceOf). Taken for one silent since, a
			// spoofer's word just after the router was named again
			// passed for its answer (FuzzTwoRouters 14a75d1d90c638ea).
			l.voiceFloor = later(l.voiceFloor, l.untrusted)
		}
		for k := range l.ra {
			if !pol.Trusts(k.router) {
				delete(l.ra, k)
			}
		}
		for r := range l.speakers {
			if !pol.Trusts(r) {
				delete(l.speakers, r)
			}
		}
		for r := range l.since {
			if !pol.Trusts(r) {
				delete(l.since, r)
			}
		}
		// How it answers: its words are no longer read, so a probe of a
		// solicitation would miss its multicast answer and conclude
		// "unicast" on another speaker's word (FuzzCorroboration
		// 9c2f99fd4db69126). Forgotten as a voice pushed out is: it may
		// have spoken as late as its last word (voiceOf).
		for r, v := range l.voices {
			if !pol.Trusts(r) {
				l.voiceFloor = later(l.voiceFloor, later(v.last, v.lastMcast))
				delete(l.voices, r)
			}
		}
	}
}

// vouchedFor reports, on a link that trusts some routers, whether a trusted
// router has advertised p since the agent started (a kernel address alone is
// believed only then: the kernel forms addresses from any router's RA).
func (l *link) vouchedFor(p netip.Prefix) bool { return l.vouched[p] != 0 }

// vouch says on whose word a prefix is vouched for.
type vouch uint8

const (
	// vouchSeed: the digest published before a restart carried it.
	vouchSeed vouch = iota + 1
	// vouchRA: a believed RA offered it. Its SLAAC addresses keep it
	// reported, but not preferred, once no believed RA states it.
	vouchRA
)

// untrusted returns the rejection of a prefix only the kernel reports, or nil.
func (s *State) untrusted(name string, l *link, p netip.Prefix, sources digest.Source) *Rejected {
	// A delegated prefix is the node's own DHCPv6 client's word, not a
	// router's on the LAN: trustedRouters does not apply to it.
	if s.policies[name].Trusted == nil || sources&(digest.SourceRA|digest.SourcePD) != 0 || l.vouchedFor(p) {
		return nil
	}
	return &Rejected{Link: name, Prefix: p, Reason: ErrUntrusted}
}

// Senior reports whether router is the first still advertising on the link
// heard of (the home router, as far as an agent can tell).
func (s *State) Senior(name string, router netip.Addr) bool {
	l := s.links[name]
	if l == nil {
		return false
	}
	t, ok := l.since[router]
	if !ok {
		return false
	}
	for r, u := range l.since {
		if u.Before(t) || (u.Equal(t) && r.Less(router)) {
			return false
		}
	}
	return true
}

// seedCap is how the digest published before a restart carried a prefix: the
// most its SLAAC addresses may say of it until a believed RA states it again.
// The kernel's flags are any RA's word (a replay's of the router's old RA, or
// a router's that omits the prefix and so never deprecates it there), so:
//   - a prefix the digest carried deprecated stays deprecated;
//   - one it carried preferred stays preferred, before the link's first
//     believed RA, no longer than the kernel's addresses in it were preferred
//     when the agent first saw them after the restart (no later refresh
//     moves that end: a replay's would hold it for ever), and only while no
//     word on the link has contradicted another since: replays that held
//     the router's renumbering back before the restart also lengthened the
//     kernel's lifetimes past what the router stated, and while they go on
//     nothing tells the agent what it did state: the digest then says what
//     an agent that did not restart says once those lifetimes end, nothing
//     preferred (without this rule FuzzCorroboration's restart seed held it
//     20 minutes past them);
//   - after the link's first believed RA, never preferred: the router's
//     offer is known again, and a prefix it states is vouched by its RA.
type seedCap struct {
	deprecated bool
	// stated: a router's RA stated it (the digest's source ra); Restated.
	stated bool
	// capped: preferred is set, from the kernel's addresses first seen.
	capped    bool
	preferred deadline
}

// capSeed lowers the preferred end a seeded prefix may have to the kernel's
// address a, seen at now, before the link's first believed RA.
func (l *link) capSeed(a Address, now time.Time) {
	p := a.Addr.Masked()
	c, ok := l.seeded[p]
	if !ok || l.sawRA || l.vouched[p] != vouchSeed {
		return
	}
	end := until(now, a.Preferred)
	if a.Deprecated || a.Preferred == 0 {
		end = deadline(now)
	}
	if !c.capped {
		c.capped, c.preferred = true, end
	} else {
		c.preferred = earlier(c.preferred, end)
	}
	l.seeded[p] = c
}

// seedPreferred reports whether a seeded prefix's SLAAC addresses may keep it
// preferred at now (seedCap).
func (l *link) seedPreferred(p netip.Prefix, now time.Time) bool {
	c := l.seeded[p]
	return !l.sawRA && !l.contradicted && !c.deprecated && c.capped && !c.preferred.passed(now)
}

// Restated reports whether every watched link has believed an RA, and every
// prefix the seed carried preferred on a router's word (source ra) has been
// stated by a believed RA since: until then the agent's first digest after a
// restart is half-observed (the agent holds it back, no longer than its
// startup grace). The link's first believed RA ends every seed's cap
// (seedCap), so with two routers on the link, a prefix only the second
// states was published deprecated once the first router's RA was believed,
// and preferred again once the second's was: two writes for a world that
// did not change. A prefix the memory restored (Remember) is not seeded.
func (s *State) Restated() bool {
	for _, l := range s.links {
		if !l.sawRA {
			return false
		}
		for p := range l.seeded {
			if l.awaitsRestatement(p) {
				return false
			}
		}
	}
	return true
}

// awaitsRestatement reports whether p was seeded preferred on a router's
// word and no believed RA has stated it since.
func (l *link) awaitsRestatement(p netip.Prefix) bool {
	c, ok := l.seeded[p]
	return ok && c.stated && !c.deprecated && l.vouched[p] == vouchSeed
}

// restates reports whether proposal p offers a prefix awaiting its
// restatement.
func (l *link) restates(p *proposal) bool {
	for pfx := range p.word.states {
		if p.offers(pfx) && l.awaitsRestatement(pfx) {
			return true
		}
	}
	return false
}
