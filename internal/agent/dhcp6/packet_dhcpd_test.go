package dhcp6

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Releases under the client's DUID that ISC dhcpd 4.4.3 acts on, sent
// where any host on the link can send them, are reported (found by a red
// team, issue 42; each failed before). Each case is a packet (or the
// fragments of one) as the client's node hears it on its link; the kernel
// delivered each to a UDP socket bound to [::]:547 that joined ff02::1:2
// only (as dhcpd's), checked in two network namespaces on Linux 6.18
// (e2e/dhcpv6forgedpackets_test.go has them against real dhcpd).
//
//   - To all nodes (ff02::1), or any other group: a socket bound to the
//     wildcard address gets the datagrams sent to every group its
//     interface joined (IPV6_MULTICAST_ALL is on by default; dhcpd does
//     not turn it off), and dhcpd (common/discover.c) calls any multicast
//     destination not-unicast, so it acts on a Release there as on one to
//     ff02::1:2. The filter and readPacket keep any multicast destination.
//   - Nested in nine Relay-Forwards: dhcpd's dhcpv6_relay_forw unwraps
//     recursively with no limit on nesting or hop count (its
//     MAX_V6RELAY_HOPS bounds relay matching in its configuration, not what
//     it accepts); readHeard unwraps as deep as the datagram goes.
//   - A first fragment cut inside an extension header that another
//     extension header follows: Linux drops a first fragment that does not
//     hold the whole header chain through UDP (RFC 8200 4.5,
//     ipv6frag_thdr_truncated), but that check walks with
//     ipv6_skip_exthdr, which fails (-1, "not truncated") when the next
//     header starts past the fragment, so such a fragment is reassembled
//     and the datagram delivered. readPacket reads a first fragment whose
//     chain runs past its end as a datagram it cannot see into, which the
//     Watch reports (no client sends one).
func TestReleasesDhcpdActsOnAreHeard(t *testing.T) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	release := clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 9, pdA).ToBytes()
	nested := release
	for range 9 {
		nested = relayed(nested)
	}
	// 2,048 bytes of destination options (eight skippable options of type
	// 0x1e, as Linux accepts: no padding run past 7 bytes, at most 8
	// options), then 8 bytes of destination options, then UDP.
	var long []byte
	for left := 2046; left > 0; {
		n := min(left, 257)
		long = append(append(long, 0x1e, byte(n-2)), make([]byte, n-2)...)
		left -= n
	}
	chained := ipv6Packet(allServers, []ext{{nhDestOpts, long}, {nhDestOpts, []byte{1, 4, 0, 0, 0, 0}}}, ServerPort, release, 0)
	for _, c := range []struct {
		name string
		pkts [][]byte
	}{
		{"a Release to all nodes (ff02::1)", [][]byte{ipv6Packet(netip.MustParseAddr("ff02::1"), nil, ServerPort, release, 0)}},
		{"a Release in nine nested Relay-Forwards", [][]byte{ipv6Packet(allServers, nil, ServerPort, nested, 0)}},
		{"a Release in fragments, the first cut inside destination options", fragmented(chained, 1232)},
		{"the same, its later fragment first", reversed(fragmented(chained, 1232))},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, _ := loggedWatch(t)
			heard, kept := false, false
			for _, p := range c.pkts {
				kept = kept || keeps(t, p)
				heard = w.HeardPacket(p, time.Unix(1e9, 0)) || heard
			}
			if !kept {
				t.Error("the kernel's filter drops every packet of it")
			}
			if !heard {
				t.Error("not reported: dhcpd releases the client's delegation, the agent says nothing until the client's next Renew")
			}
		})
	}
}

// fragmented cuts pkt, an IPv6 packet with no fragment header, into two
// fragments at cut bytes of its fragmentable part (all after the IPv6
// header; a multiple of 8), as any host can send them.
func fragmented(pkt []byte, cut int) [][]byte {
	part, next := pkt[40:], pkt[6]
	frag := func(offset int, more bool, b []byte) []byte {
		h := append([]byte{}, pkt[:40]...)
		binary.BigEndian.PutUint16(h[4:], uint16(8+len(b)))
		h[6] = nhFragment
		v := uint16(offset/8) << 3
		if more {
			v |= 1
		}
		h = append(h, next, 0)
		h = binary.BigEndian.AppendUint16(h, v)
		h = append(h, 0, 0, 0x42, 0x42) // identification
		return append(h, b...)
	}
	return [][]byte{frag(0, true, part[:cut]), frag(cut, false, part[cut:])}
}

func reversed(p [][]byte) [][]byte { return [][]byte{p[1], p[0]} }

// FuzzReadPacketAsLinux plays the attacker FuzzReadPacket plays, with
// what that one leaves out: any destination dhcpd's wildcard socket is
// handed (either servers' group, all nodes, which every host on the link
// receives, all routers, which a forwarding host joins, or any other
// group), any nesting of Relay-Forwards (up to 255), and a cut into fragments
// anywhere in the fragmentable part, the extension headers included. A cut
// Linux would not reassemble is skipped (first fragment under 1,280
// bytes, or a header chain through UDP the kernel's first-fragment check
// finds cut: linuxReassembles). Whatever else it builds, the Watch
// reports the Release in one of the packets, one the kernel's filter
// keeps. The first three seeds are the findings of
// TestReleasesDhcpdActsOnAreHeard, which failed before.
func FuzzReadPacketAsLinux(f *testing.F) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		f.Fatal(err)
	}
	release := clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 9, pdA).ToBytes()
	f.Add(uint8(2), uint8(0), []byte{}, uint16(0))             // to ff02::1
	f.Add(uint8(0), uint8(9), []byte{}, uint16(0))             // nine Relay-Forwards
	f.Add(uint8(0), uint8(0), []byte{1, 255, 1, 0}, uint16(1)) // cut inside 2 KiB of destination options
	f.Add(uint8(1), uint8(8), []byte{0, 3}, uint16(0))         // held: eight deep, behind hop-by-hop, to ff05::1:3
	f.Fuzz(func(t *testing.T, to, relays uint8, chain []byte, cut uint16) {
		dst := []netip.Addr{allServers, siteServers, netip.MustParseAddr("ff02::1"), netip.MustParseAddr("ff02::2"),
			netip.MustParseAddr("ff05::2"), netip.MustParseAddr("ff02::1:ff00:1"), netip.MustParseAddr("ff0e::1:2")}[to%7]
		m := release
		for range relays {
			m = relayed(m)
		}
		var exts []ext
		for len(chain) >= 2 && len(exts) < 8 {
			kind := []byte{nhHopByHop, nhDestOpts, nhRouting, nhAH}[chain[0]%4]
			if kind == nhHopByHop && len(exts) > 0 {
				kind = nhDestOpts
			}
			units := int(chain[1])
			if kind == nhAH {
				units %= 128 // its length byte counts 4-byte units
			}
			exts = append(exts, ext{kind: kind, body: make([]byte, units*8+6)})
			chain = chain[2:]
		}
		pkt := ipv6Packet(dst, exts, ServerPort, m, 0)
		if len(pkt) > 40+0xffff {
			return
		}
		pkts := [][]byte{pkt}
		if cut%2 == 1 {
			part := len(pkt) - 40
			at := 1232 + int(cut/2)%max(part/8-154+1, 1)*8
			if at >= part || !linuxReassembles(pkt[6], pkt[40:40+at]) {
				return
			}
			pkts = fragmented(pkt, at)
		}
		w, _ := loggedWatch(t)
		for _, p := range pkts {
			if w.HeardPacket(p, time.Unix(1e9, 0)) {
				if !keeps(t, p) {
					t.Fatal("reported from a packet the kernel's filter drops")
				}
				return
			}
		}
		t.Fatalf("a Release to %s in %d Relay-Forwards behind %d extension headers (%d packets) not reported", dst, relays, len(exts), len(pkts))
	})
}

// linuxReassembles is whether Linux keeps a first fragment whose
// fragmentable part is first, its first header next (RFC 8200 4.5 as
// net/ipv6/reassembly.c reads it: ipv6_skip_exthdr walks the headers by
// their stated lengths, and only a chain that reaches UDP short of its 8
// bytes is cut; a walk that cannot read the next header's first two bytes
// fails, and the fragment is kept).
func linuxReassembles(next byte, first []byte) bool {
	at := 0
	for {
		switch next {
		case nhHopByHop, nhRouting, nhDestOpts, nhAH:
		case nhUDP:
			return at+8 <= len(first)
		default:
			return true
		}
		if at+2 > len(first) {
			return true // ipv6_skip_exthdr: -1, "not truncated"
		}
		size := (int(first[at+1]) + 1) * 8
		if next == nhAH {
			size = (int(first[at+1]) + 2) * 4
		}
		next, at = first[at], at+size
	}
}
