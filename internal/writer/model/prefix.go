// The address arithmetic of DynamicPrefix specs: host-part
// suffixes spliced onto a prefix, address ranges, the offset-th subnet of a
// length, and the smallest CIDR covering a range. Pure; every input is checked,
// nothing overflows or panics.

package model

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
)

// ErrInvalidPrefix is wrapped by every error of the address arithmetic.
var ErrInvalidPrefix = errors.New("prefix: invalid")

func check(p netip.Prefix) (netip.Prefix, error) {
	if !p.IsValid() || !p.Addr().Is6() || p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%w: %v is not an IPv6 prefix", ErrInvalidPrefix, p)
	}
	return p.Masked(), nil
}

func toInt(a netip.Addr) *big.Int {
	b := a.As16()
	return new(big.Int).SetBytes(b[:])
}

func fromInt(i *big.Int) netip.Addr {
	var b [16]byte
	i.FillBytes(b[:])
	return netip.AddrFrom16(b)
}

func hostMask(bits int) *big.Int {
	m := new(big.Int).Lsh(big.NewInt(1), uint(128-bits))
	return m.Sub(m, big.NewInt(1))
}

// Splice puts suffix's host bits onto p. The suffix must have no bits inside the
// network part (it must lie "inside the prefix"); p may be unmasked.
func Splice(p netip.Prefix, suffix netip.Addr) (netip.Addr, error) {
	p, err := check(p)
	if err != nil {
		return netip.Addr{}, err
	}
	// A suffix is a bit pattern: "::ffff:0:1" (IPv4-mapped to netip) is fine.
	if !suffix.Is6() {
		return netip.Addr{}, fmt.Errorf("%w: suffix %v is not IPv6", ErrInvalidPrefix, suffix)
	}
	s := toInt(suffix.WithZone(""))
	mask := hostMask(p.Bits())
	if new(big.Int).AndNot(s, mask).Sign() != 0 {
		return netip.Addr{}, fmt.Errorf("%w: suffix %s has bits outside the host part of a /%d", ErrInvalidPrefix, suffix, p.Bits())
	}
	return fromInt(s.Or(s, toInt(p.Addr()))), nil
}

// HostBits is a's bits below p's length (the suffix Splice puts back).
func HostBits(a netip.Addr, p netip.Prefix) netip.Addr {
	s := toInt(a)
	return fromInt(s.And(s, hostMask(p.Bits())))
}

// SpliceRange splices start and end onto p and checks start <= end.
func SpliceRange(p netip.Prefix, start, end netip.Addr) (netip.Addr, netip.Addr, error) {
	first, err := Splice(p, start)
	if err != nil {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("start: %w", err)
	}
	last, err := Splice(p, end)
	if err != nil {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("end: %w", err)
	}
	if last.Less(first) {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%w: range start %s is after end %s", ErrInvalidPrefix, start, end)
	}
	return first, last, nil
}

// SubnetAt returns the offset-th subnet of the given length inside p. The length
// must be at least p's, at most 128, and the offset below 2^(length-p.Bits()).
func SubnetAt(p netip.Prefix, offset int64, length int) (netip.Prefix, error) {
	p, err := check(p)
	if err != nil {
		return netip.Prefix{}, err
	}
	if length < p.Bits() || length > 128 {
		return netip.Prefix{}, fmt.Errorf("%w: a /%d subnet does not fit in %s", ErrInvalidPrefix, length, p)
	}
	if offset < 0 {
		return netip.Prefix{}, fmt.Errorf("%w: negative subnet offset %d", ErrInvalidPrefix, offset)
	}
	limit := new(big.Int).Lsh(big.NewInt(1), uint(length-p.Bits()))
	off := big.NewInt(offset)
	if off.Cmp(limit) >= 0 {
		return netip.Prefix{}, fmt.Errorf("%w: offset %d is outside %s (at most %s /%d subnets)", ErrInvalidPrefix, offset, p, limit, length)
	}
	base := toInt(p.Addr())
	base.Or(base, off.Lsh(off, uint(128-length)))
	return netip.PrefixFrom(fromInt(base), length), nil
}

// Covering returns the smallest CIDR that contains every address from first to
// last (first <= last, both IPv6).
func Covering(first, last netip.Addr) (netip.Prefix, error) {
	if !first.Is6() || !last.Is6() || first.Is4In6() || last.Is4In6() || last.Less(first) {
		return netip.Prefix{}, fmt.Errorf("%w: range %v-%v", ErrInvalidPrefix, first, last)
	}
	a, b := first.As16(), last.As16()
	bits := 0
	for i := range 16 {
		x := a[i] ^ b[i]
		if x == 0 {
			bits += 8
			continue
		}
		for x&0x80 == 0 {
			bits++
			x <<= 1
		}
		break
	}
	return netip.PrefixFrom(first, bits).Masked(), nil
}

// Bounds returns the first and the last address of the IPv6 prefix p.
func Bounds(p netip.Prefix) (first, last netip.Addr) {
	p = p.Masked()
	return p.Addr(), fromInt(new(big.Int).Or(toInt(p.Addr()), hostMask(p.Bits())))
}
