// The address a router's prefix translation maps an inside address to, for
// the two kinds of translation routers do:
//
//   - nptv6: RFC 6296's checksum-neutral prefix translation (the BSDs' and
//     OPNsense's NPTv6, Linux's ip6tables SNPT/DNPT): the prefix is replaced
//     and one 16-bit word after it is adjusted so that the one's complement
//     sum of the address - and so every transport checksum - is unchanged.
//     The word is bits 48-63 for a prefix of /48 or shorter; for a longer
//     one, the first word of the interface identifier (bits 64-127) that is
//     not 0xFFFF. An adjusted word of 0xFFFF is written as 0x0000 (both are
//     zero in one's complement). Written as Linux's net/ipv6/netfilter/
//     ip6t_NPT.c computes it, which e2e tests against.
//   - netmap: the prefix bits are replaced, nothing else (Linux's NETMAP,
//     nftables' prefix NAT, OpenWrt's "netmap").
//
// Pure; every input is checked.

package model

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Mappings a router may translate with.
const (
	MappingNPTv6  = "nptv6"
	MappingNetmap = "netmap"
)

// Map returns the address inside is translated to when the router maps the
// prefix from onto to with mapping (MappingNPTv6 or MappingNetmap). from and
// to must be IPv6 and of the same length (at most /64 for nptv6); inside must
// lie in from.
func Map(mapping string, inside netip.Addr, from, to netip.Prefix) (netip.Addr, error) {
	if !from.IsValid() || !to.IsValid() || !from.Addr().Is6() || !to.Addr().Is6() || from.Addr().Is4In6() || to.Addr().Is4In6() {
		return netip.Addr{}, fmt.Errorf("%w: mapping %v to %v: not IPv6 prefixes", ErrInvalidPrefix, from, to)
	}
	from, to = from.Masked(), to.Masked()
	if from.Bits() != to.Bits() {
		return netip.Addr{}, fmt.Errorf("%w: mapping %s to %s: the prefixes differ in length", ErrInvalidPrefix, from, to)
	}
	if !inside.Is6() || inside.Is4In6() || !from.Contains(inside.WithZone("")) {
		return netip.Addr{}, fmt.Errorf("%w: %v is not inside %s", ErrInvalidPrefix, inside, from)
	}
	a := inside.WithZone("").As16()
	t := to.Addr().As16()
	for i := range 16 { // the prefix bits of to, the rest of a
		host := byte(0xff)
		if bits := from.Bits() - 8*i; bits >= 8 {
			host = 0
		} else if bits > 0 {
			host = 0xff >> bits
		}
		a[i] = a[i]&host | t[i]&^host
	}
	switch mapping {
	case MappingNetmap:
		return netip.AddrFrom16(a), nil
	case MappingNPTv6:
	default:
		return netip.Addr{}, fmt.Errorf("%w: mapping %q: want %s or %s", ErrInvalidPrefix, mapping, MappingNPTv6, MappingNetmap)
	}
	if from.Bits() > 64 {
		return netip.Addr{}, fmt.Errorf("%w: nptv6 maps prefixes of /64 or shorter, not /%d", ErrInvalidPrefix, from.Bits())
	}
	// Checksum neutral: the word takes what the prefix's sum loses.
	adjust := onesAdd(onesSum(from.Addr().As16()), ^onesSum(to.Addr().As16()))
	idx := 3
	if from.Bits() > 48 {
		for idx = 4; idx < 8 && binary.BigEndian.Uint16(a[2*idx:]) == 0xffff; idx++ {
		}
		if idx == 8 {
			return netip.Addr{}, fmt.Errorf("%w: %s has no interface identifier word but 0xFFFF: nptv6 cannot map it", ErrInvalidPrefix, inside)
		}
	}
	w := onesAdd(binary.BigEndian.Uint16(a[2*idx:]), adjust)
	if w == 0xffff {
		w = 0
	}
	binary.BigEndian.PutUint16(a[2*idx:], w)
	return netip.AddrFrom16(a), nil
}

// onesSum is the one's complement sum of the eight 16-bit words of a.
func onesSum(a [16]byte) uint16 {
	var s uint16
	for i := 0; i < 16; i += 2 {
		s = onesAdd(s, binary.BigEndian.Uint16(a[i:]))
	}
	return s
}

// onesAdd adds in one's complement: the carry wraps around.
func onesAdd(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s&0xffff + s>>16)
}
