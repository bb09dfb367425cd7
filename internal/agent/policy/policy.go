// Package policy is what the DynamicPrefixes following a link ask of the
// agent there: which prefixes it may report (global unicast only, length
// bounds) and whose Router Advertisements it believes (trusted routers).
// Package uplink derives one per link from the DynamicPrefixes; package
// observe applies it.
package policy

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/renumber/renumber/internal/digest"
)

// Policy is what the DynamicPrefixes following a link ask of the agent there.
type Policy struct {
	// GlobalOnly: only prefixes inside 2000::/3 are reported.
	GlobalOnly bool
	// Trusted: only RAs from these routers are believed (nil: every router).
	Trusted []netip.Addr
	// MinLength, MaxLength bound a reported prefix's length (0: no bound).
	MinLength, MaxLength int
	// Delegated: a DynamicPrefix acquires by DHCPv6-PD on this link, so the
	// prefixes delegated to the node (observe.State.Delegated) are reported here.
	Delegated bool
	// FollowDeprecated: a DynamicPrefix here follows a prefix its router
	// advertises only deprecated (routerAdvertisement.followDeprecated):
	// observe reports one such prefix as preferred while none is.
	FollowDeprecated bool
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
		pol.MinLength == o.MinLength && pol.MaxLength == o.MaxLength && pol.Delegated == o.Delegated &&
		pol.FollowDeprecated == o.FollowDeprecated
}

// RequireGlobalUnicast refuses prefixes outside 2000::/3 (unique-local, link-local,
// multicast, ...): an RA carrying only a ULA must never look like a renumbering.
func RequireGlobalUnicast(_ string, p netip.Prefix) error {
	if !digest.GlobalUnicast(p) {
		return fmt.Errorf("%s is not global unicast (outside 2000::/3)", p)
	}
	return nil
}
