// Package ra listens for Router Advertisements on one link and hands their
// validated prefixes to the agent. Parsing is pure (Parse); the listener recovers
// from every socket error by itself, with backoff.
package ra

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"

	"github.com/renumber/renumber/internal/agent/observe"
)

// ErrNotRA is returned by Parse for messages that are not a valid RA.
var ErrNotRA = errors.New("ra: not a valid router advertisement")

// MaxDelegation is the longest prefix a Prefix Information option may carry to
// be reported: hosts form addresses in /64s, and a delegated prefix is never
// longer (a /128, say, is a misconfiguration or an attack).
const MaxDelegation = 64

// ParseRaw validates one ICMPv6 message as a Router Advertisement, by every
// rule of RFC 4861 6.1.2 but the checksum (the listener verifies it,
// verifyChecksum, the kernel's verification being off): source link-local, hop limit 255, ICMP code 0, 16 octets or
// more, every option's length above 0 and within the message. It returns the
// RA's usable prefixes, and an error for each Prefix Information option it
// ignores.
//
// It walks the options itself rather than through ndp.ParseMessage, which
// refuses a whole RA for one option it cannot decode (an RDNSS option with no
// server, say): only the Prefix Information options are decoded, and a bad
// one is skipped, not the router's whole RA with it.
func ParseRaw(b []byte, from netip.Addr, hopLimit int) ([]observe.RAPrefix, []error, error) {
	if len(b) >= 1 && b[0] != byte(ipv6.ICMPTypeRouterAdvertisement) {
		return nil, nil, fmt.Errorf("%w: ICMPv6 type %d from %s", ErrNotRA, b[0], from)
	}
	if len(b) >= 2 && b[1] != 0 {
		return nil, nil, fmt.Errorf("%w: ICMP code %d from %s, want 0", ErrNotRA, b[1], from)
	}
	if len(b) < 16 {
		return nil, nil, fmt.Errorf("%w: %d octets from %s, want 16 or more", ErrNotRA, len(b), from)
	}
	if err := source(from, hopLimit); err != nil {
		return nil, nil, err
	}
	var out []observe.RAPrefix
	var bad []error
	for opts := b[16:]; len(opts) > 0; {
		if len(opts) < 2 || opts[1] == 0 || int(opts[1])*8 > len(opts) {
			return nil, nil, fmt.Errorf("%w: an option of bad length from %s", ErrNotRA, from)
		}
		o := opts[:int(opts[1])*8]
		opts = opts[len(o):]
		if o[0] != optPrefixInformation {
			continue
		}
		pi, err := prefixInformation(o)
		if err == nil {
			var p observe.RAPrefix
			if p, err = prefix(pi); err == nil {
				out = append(out, p)
				continue
			}
		}
		bad = append(bad, err)
	}
	return out, bad, nil
}

// optPrefixInformation is the Prefix Information option's type (RFC 4861 4.6.2).
const optPrefixInformation = 3

// prefixInformation decodes one Prefix Information option (32 octets).
func prefixInformation(o []byte) (*ndp.PrefixInformation, error) {
	if len(o) != 32 {
		return nil, fmt.Errorf("ra: prefix information option of %d octets, want 32", len(o))
	}
	return &ndp.PrefixInformation{
		PrefixLength:                   o[2],
		OnLink:                         o[3]&0x80 != 0,
		AutonomousAddressConfiguration: o[3]&0x40 != 0,
		ValidLifetime:                  time.Duration(binary.BigEndian.Uint32(o[4:8])) * time.Second,
		PreferredLifetime:              time.Duration(binary.BigEndian.Uint32(o[8:12])) * time.Second,
		Prefix:                         netip.AddrFrom16([16]byte(o[16:32])),
	}, nil
}

// source applies RFC 4861 6.1.2's rules on where an RA comes from.
func source(from netip.Addr, hopLimit int) error {
	if !from.Is6() || !from.IsLinkLocalUnicast() {
		return fmt.Errorf("%w: source %s is not link-local", ErrNotRA, from)
	}
	if hopLimit != ndp.HopLimit {
		return fmt.Errorf("%w: hop limit %d from %s, want 255", ErrNotRA, hopLimit, from)
	}
	return nil
}

// Parse validates an NDP message as a Router Advertisement (RFC 4861 6.1.2: link-
// local source, hop limit 255) and returns its usable prefixes. Options that must
// be ignored (bad length, link-local or multicast prefix, preferred > valid, a
// length no on-link delegation has) are returned as errors next to the good
// ones, never as a failure of the whole RA.
func Parse(m ndp.Message, from netip.Addr, hopLimit int) ([]observe.RAPrefix, []error, error) {
	ra, ok := m.(*ndp.RouterAdvertisement)
	if !ok {
		return nil, nil, fmt.Errorf("%w: message %T", ErrNotRA, m)
	}
	if err := source(from, hopLimit); err != nil {
		return nil, nil, err
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
	if pi.PrefixLength > MaxDelegation {
		return observe.RAPrefix{}, fmt.Errorf("ra: prefix %s/%d is longer than /%d: no on-link delegation is", pi.Prefix, pi.PrefixLength, MaxDelegation)
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
