// Package ra listens for Router Advertisements on one link and hands their
// validated prefixes to the agent. Parsing is pure (Parse); the listener recovers
// from every socket error by itself, with backoff.
package ra

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/agent/observe"
)

// ErrNotRA is returned by Parse for messages that are not a valid RA.
var ErrNotRA = errors.New("ra: not a valid router advertisement")

// Parse validates an NDP message as a Router Advertisement (RFC 4861 6.1.2: link-
// local source, hop limit 255) and returns its usable prefixes. Options that must
// be ignored (bad length, link-local or multicast prefix, preferred > valid) are
// returned as errors next to the good ones, never as a failure of the whole RA.
func Parse(m ndp.Message, from netip.Addr, hopLimit int) ([]observe.RAPrefix, []error, error) {
	ra, ok := m.(*ndp.RouterAdvertisement)
	if !ok {
		return nil, nil, fmt.Errorf("%w: message %T", ErrNotRA, m)
	}
	if !from.Is6() || !from.IsLinkLocalUnicast() {
		return nil, nil, fmt.Errorf("%w: source %s is not link-local", ErrNotRA, from)
	}
	if hopLimit != ndp.HopLimit {
		return nil, nil, fmt.Errorf("%w: hop limit %d from %s, want 255", ErrNotRA, hopLimit, from)
	}
	var out []observe.RAPrefix
	var bad []error
	for _, o := range ra.Options {
		pi, ok := o.(*ndp.PrefixInformation)
		if !ok {
			continue
		}
		p, err := prefix(pi)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, p)
	}
	return out, bad, nil
}

func prefix(pi *ndp.PrefixInformation) (observe.RAPrefix, error) {
	if pi.PrefixLength == 0 || pi.PrefixLength > 128 {
		return observe.RAPrefix{}, fmt.Errorf("ra: prefix length %d out of range", pi.PrefixLength)
	}
	if !pi.Prefix.Is6() || pi.Prefix.Is4In6() {
		return observe.RAPrefix{}, fmt.Errorf("ra: prefix %v is not IPv6", pi.Prefix)
	}
	p := netip.PrefixFrom(pi.Prefix.WithZone(""), int(pi.PrefixLength)).Masked()
	if a := p.Addr(); a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() || a.IsLoopback() {
		return observe.RAPrefix{}, fmt.Errorf("ra: prefix %s is link-local, multicast or reserved", p)
	}
	if pi.PreferredLifetime > pi.ValidLifetime {
		return observe.RAPrefix{}, fmt.Errorf("ra: prefix %s preferred lifetime %s exceeds valid %s", p, pi.PreferredLifetime, pi.ValidLifetime)
	}
	return observe.RAPrefix{Prefix: p, Valid: pi.ValidLifetime, Preferred: pi.PreferredLifetime, Autonomous: pi.AutonomousAddressConfiguration}, nil
}
