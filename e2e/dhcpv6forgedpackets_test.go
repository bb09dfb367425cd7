package e2e

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/renumber/renumber/tools/world"
)

// Forged Releases ISC dhcpd 4.4.3 acts on, sent where any host on the
// link can send them, that the client's node did not report before (found
// by a red team, issue 42). Each asserts what forgedReleaseReported asserts
// of the variants the Watch hears: dhcpd releases the prefix, and the
// client's node counts the forgery in
// renumber_agent_dhcpv6_impersonations_total with RouterConflict True. The
// unit cases are internal/agent/dhcp6/packet_dhcpd_test.go.

// TestDHCPv6PDAReleaseToAllNodesIsReported: the Release sent to ff02::1.
// dhcpd's socket is bound to [::]:547, so the kernel hands it datagrams
// to every group its link joined (IPV6_MULTICAST_ALL), and dhcpd treats
// any multicast destination as a client's multicast. Every host on the
// link receives ff02::1, the client's node too.
func TestDHCPv6PDAReleaseToAllNodesIsReported(t *testing.T) {
	forgedReleaseReported(t, "impersonations", func(renew *dhcpv6.Message, w *world.World) []byte {
		return forgedRelease(t, renew).ToBytes()
	}, toAllNodes)
}

// TestDHCPv6PDAReleaseInNineRelayForwardsIsReported: the Release wrapped in
// nine nested Relay-Forwards, to ff02::1:2. dhcpd unwraps any number.
func TestDHCPv6PDAReleaseInNineRelayForwardsIsReported(t *testing.T) {
	forgedReleaseReported(t, "impersonations", func(renew *dhcpv6.Message, w *world.World) []byte {
		var m dhcpv6.DHCPv6 = forgedRelease(t, renew)
		for range 9 {
			r, err := dhcpv6.EncapsulateRelay(m, dhcpv6.MessageTypeRelayForward, net.IPv6zero, net.ParseIP("fe80::bad"))
			if err != nil {
				t.Fatal(err)
			}
			m = r
		}
		return m.ToBytes()
	}, toTheGroup)
}

// TestDHCPv6PDAReleaseInFragmentsCutInsideAnExtensionHeaderIsReported: the
// Release to ff02::1:2 behind 2 KiB of destination options and another
// 8-byte destination options header, cut into two fragments inside the
// first header. Linux reassembles it (its check that a first fragment
// holds the headers through UDP gives up when the next header starts past
// the fragment) and dhcpd acts on it.
func TestDHCPv6PDAReleaseInFragmentsCutInsideAnExtensionHeaderIsReported(t *testing.T) {
	forgedReleaseReported(t, "impersonations", func(renew *dhcpv6.Message, w *world.World) []byte {
		return forgedRelease(t, renew).ToBytes()
	}, inCutFragments)
}

// cutInsideExtensionHeaders is the two fragments of an IPv6 packet from
// fe80::bad to ff02::1:2 carrying m to port 547: a fragment header, 2,048
// bytes of destination options (skippable options of type 0x1e: Linux
// drops padding runs past 7 bytes and more than 8 options), 8 bytes of
// destination options, UDP with its checksum. The first fragment holds
// 1,232 bytes of the first destination options header.
func cutInsideExtensionHeaders(m []byte) [][]byte {
	src, dst := netip.MustParseAddr("fe80::bad"), netip.MustParseAddr("ff02::1:2")
	long := []byte{60, 255} // next: destination options; 256 units of 8 bytes
	for left := 2046; left > 0; {
		n := min(left, 257)
		long = append(append(long, 0x1e, byte(n-2)), make([]byte, n-2)...)
		left -= n
	}
	short := []byte{17, 0, 1, 4, 0, 0, 0, 0} // next: UDP; PadN
	udp := binary.BigEndian.AppendUint16(nil, 546)
	udp = binary.BigEndian.AppendUint16(udp, 547)
	udp = binary.BigEndian.AppendUint16(udp, uint16(8+len(m)))
	udp = append(append(udp, 0, 0), m...)
	binary.BigEndian.PutUint16(udp[6:], udpChecksum(src, dst, udp))
	part := append(append(long, short...), udp...)
	const cut = 1232
	frag := func(offset int, more bool, b []byte) []byte {
		h := []byte{0x60, 0, 0, 0}
		h = binary.BigEndian.AppendUint16(h, uint16(8+len(b)))
		h = append(h, 44, 1) // fragment header; hop limit 1
		h = append(append(h, src.AsSlice()...), dst.AsSlice()...)
		v := uint16(offset/8) << 3
		if more {
			v |= 1
		}
		h = append(h, 60, 0)
		h = binary.BigEndian.AppendUint16(h, v)
		h = append(h, 0x5e, 0x1f, 0x42, 0x42) // identification
		return append(h, b...)
	}
	return [][]byte{frag(0, true, part[:cut]), frag(cut, false, part[cut:])}
}

// udpChecksum is the checksum of udp (its checksum field zero) from src to
// dst over IPv6.
func udpChecksum(src, dst netip.Addr, udp []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src.AsSlice())
	add(dst.AsSlice())
	add(binary.BigEndian.AppendUint32(nil, uint32(len(udp))))
	add([]byte{0, 0, 0, 17})
	add(udp)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	if c := ^uint16(sum); c != 0 {
		return c
	}
	return 0xffff
}

// TestDHCPv6PDAReleaseRightAfterAFloodIsReported: the Release sent as
// clients send it, to ff02::1:2, amid a burst of 40,000 first
// fragments (20,000 before it, 20,000 after) to ff02::1:2 whose later fragments never come (floodFragments:
// another client's Release, its Client ID whole, then 1,400 bytes of
// 4-byte options). No host's kernel delivers any of them to a socket (they
// wait in reassembly and expire), so dhcpd reads the Release at once; the
// kernel's filter keeps every one for the agent's packet socket, the Watch
// walks each one's options (another client's: nothing to report), and its
// receive buffer (the default, ~210 KB: about 90 such packets) overflows
// if it reads slower than the forger sends. A Release dropped with the
// junk would go unreported; the drops are counted
// (renumber_agent_dhcpv6_listener_dropped_total, from PACKET_STATISTICS,
// logged here) and warned of, so a missed one is known possible.
func TestDHCPv6PDAReleaseRightAfterAFloodIsReported(t *testing.T) {
	forgedReleaseReported(t, "impersonations", func(renew *dhcpv6.Message, w *world.World) []byte {
		return forgedRelease(t, renew).ToBytes()
	}, afterAFlood)
}

// floodFragments is n first fragments from fe80::bad to ff02::1:2, each
// of its own datagram (its own identification), each UDP to port 547
// carrying a Release under a DUID of no client's, its Client ID whole,
// then 4-byte options to 1,400 bytes.
func floodFragments(n int) [][]byte {
	src, dst := netip.MustParseAddr("fe80::bad"), netip.MustParseAddr("ff02::1:2")
	m := []byte{byte(dhcpv6.MessageTypeRelease), 1, 2, 3}
	m = append(m, 0, 1, 0, 10, 0, 3, 0, 1, 2, 0, 0, 0, 0x5e, 0x1e) // Client ID: a DUID-LL of no client's
	for len(m) < 1400 {
		m = append(m, 0x7f, 0x7f, 0, 0)
	}
	pkts := make([][]byte, n)
	for i := range pkts {
		h := []byte{0x60, 0, 0, 0}
		h = binary.BigEndian.AppendUint16(h, uint16(8+8+len(m)))
		h = append(h, 44, 1)
		h = append(append(h, src.AsSlice()...), dst.AsSlice()...)
		h = append(h, 17, 0, 0, 1) // UDP; offset 0, More
		h = binary.BigEndian.AppendUint32(h, 0x5e1f0000+uint32(i))
		h = binary.BigEndian.AppendUint16(h, 546)
		h = binary.BigEndian.AppendUint16(h, 547)
		h = binary.BigEndian.AppendUint16(h, uint16(8+len(m)+64)) // the whole datagram's
		h = append(h, 0, 0)
		pkts[i] = append(h, m...)
	}
	return pkts
}
