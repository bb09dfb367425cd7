package ra

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// The listener's socket leaves ICMPv6 checksums to it (IPV6_CHECKSUM -1 at
// SOL_RAW, conn.setup): the kernel, verifying them itself, counts a message
// that fails in the socket's drops - the count that tells a flood (Lost) - so
// one bad RA from any host on the link would pass for a full queue and make
// the agent forget every change waiting to be corroborated. Verified here, a
// bad one is an invalid message like any other.

// checksum returns the ICMPv6 checksum (RFC 4443 2.3) of b sent from src to
// dst, with b's own checksum field taken as it is: over a message whose field
// holds its checksum the result is 0.
func checksum(b []byte, src, dst netip.Addr) uint16 {
	var sum uint32
	add := func(p []byte) {
		for len(p) >= 2 {
			sum += uint32(binary.BigEndian.Uint16(p))
			p = p[2:]
		}
		if len(p) == 1 {
			sum += uint32(p[0]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	// The pseudo-header's upper-layer length (32 bits) and next header.
	var tail [8]byte
	binary.BigEndian.PutUint32(tail[:4], uint32(len(b)))
	tail[7] = 58 // ICMPv6
	add(tail[:])
	add(b)
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// verifyChecksum returns an error unless b, received from src at dst, carries
// its ICMPv6 checksum. dst is the message's destination as the kernel said
// (pktinfo): without it the checksum cannot be verified, and the message is
// refused.
func verifyChecksum(b []byte, src, dst netip.Addr) error {
	if !src.Is6() || !dst.Is6() || src.Is4In6() || dst.Is4In6() {
		return fmt.Errorf("%w: no IPv6 source and destination (%v, %v) to verify the checksum with", ErrNotRA, src, dst)
	}
	if len(b) < 4 {
		return fmt.Errorf("%w: %d octets from %s, too short for a checksum", ErrNotRA, len(b), src)
	}
	if checksum(b, src.WithZone(""), dst.WithZone("")) != 0 {
		return fmt.Errorf("%w: bad ICMPv6 checksum %#04x from %s", ErrNotRA, binary.BigEndian.Uint16(b[2:4]), src)
	}
	return nil
}
