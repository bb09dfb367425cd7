package observe

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/renumber/renumber/internal/digest"
)

// ErrUntrusted marks a prefix only the kernel reports on a link whose
// DynamicPrefixes trust some routers, and that none of them advertised.
var ErrUntrusted = errors.New("observe: no trusted router advertised it")

// Policy is what the DynamicPrefixes following a link ask of the agent there.
type Policy struct {
	// GlobalOnly: only prefixes inside 2000::/3 are reported.
	GlobalOnly bool
	// Trusted: only RAs from these routers are believed (nil: every router).
	Trusted []netip.Addr
	// MinLength, MaxLength bound a reported prefix's length (0: no bound).
	MinLength, MaxLength int
	// Delegated: a DynamicPrefix acquires by DHCPv6-PD on this link, so the
	// prefixes delegated to the node (State.Delegated) are reported here.
	Delegated bool
}

// Check says why p must not be reported under this policy, or nil.
func (pol Policy) Check(link string, p netip.Prefix) error {
	if pol.GlobalOnly {
		if err := RequireGlobalUnicast(link, p); err != nil {
			return err
		}
	}
	if pol.MinLength > 0 && p.Bits() < pol.MinLength {
		return fmt.Errorf("%s is shorter than minPrefixLength /%d", p, pol.MinLength)
	}
	if pol.MaxLength > 0 && p.Bits() > pol.MaxLength {
		return fmt.Errorf("%s is longer than maxPrefixLength /%d", p, pol.MaxLength)
	}
	return nil
}

// Trusts reports whether RAs from router are believed.
func (pol Policy) Trusts(router netip.Addr) bool {
	return pol.Trusted == nil || slices.Contains(pol.Trusted, router.WithZone(""))
}

// Equal compares two policies.
func (pol Policy) Equal(o Policy) bool {
	return pol.GlobalOnly == o.GlobalOnly && slices.Equal(pol.Trusted, o.Trusted) &&
		pol.MinLength == o.MinLength && pol.MaxLength == o.MaxLength && pol.Delegated == o.Delegated
}

// SetPolicies sets each watched link's policy (a link without one has the
// zero Policy: everything is reported).
func (s *State) SetPolicies(p map[string]Policy) { s.policies = p }

// vouchedFor reports, on a link that trusts some routers, whether a trusted
// router has advertised p since the agent started (a kernel address alone is
// believed only then: the kernel forms addresses from any router's RA).
func (l *link) vouchedFor(p netip.Prefix) bool { return l.vouched[p] }

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

// RequireGlobalUnicast refuses prefixes outside 2000::/3 (unique-local, link-local,
// multicast, ...): an RA carrying only a ULA must never look like a renumbering.
func RequireGlobalUnicast(_ string, p netip.Prefix) error {
	if !digest.GlobalUnicast(p) {
		return fmt.Errorf("%s is not global unicast (outside 2000::/3)", p)
	}
	return nil
}
