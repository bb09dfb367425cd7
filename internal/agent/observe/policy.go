package observe

import (
	"errors"
	"net/netip"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// ErrUntrusted marks a prefix only the kernel reports on a link whose
// DynamicPrefixes trust some routers, and that none of them advertised.
var ErrUntrusted = errors.New("observe: no trusted router advertised it")

// SetPolicies sets each watched link's policy (a link without one has the
// zero Policy: everything is reported).
func (s *State) SetPolicies(p map[string]policy.Policy) { s.policies = p }

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
