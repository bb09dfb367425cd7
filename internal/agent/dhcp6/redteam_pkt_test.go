package dhcp6

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// The port-547 red team (issue 42): Releases under the client's DUID that
// ISC dhcpd 4.4.3 acts on, sent where any host on the link can send them,
// that the Watch does not report. Each case is a packet (or the fragments
// of one) as the client's node hears it on its link; the kernel delivered
// each to a UDP socket bound to [::]:547 that joined ff02::1:2 only (as
// dhcpd's), checked in two network namespaces on Linux 6.18 (see the
// report; e2e/dhcpv6redteampkt_test.go has them against real dhcpd).
//
//   - To all nodes (ff02::1): a socket bound to the wildcard address gets
//     the datagrams sent to every group its interface joined
//     (IPV6_MULTICAST_ALL is on by default; dhcpd does not turn it off), and
//     dhcpd (common/discover.c) calls any multicast destination
//     not-unicast, so it acts on a Release there as on one to ff02::1:2.
//     Every host on the link receives ff02::1, the client's node too: the
//     Watch could hear it, but the filter and readPacket keep only
//     ff02::1:2 and ff05::1:3.
//   - Nested past eight Relay-Forwards: dhcpd's dhcpv6_relay_forw unwraps
//     recursively with no limit on nesting or hop count (its
//     MAX_V6RELAY_HOPS bounds relay matching in its configuration, not what
//     it accepts); readHeard stops at relayDepth (8) and calls the datagram
//     no client message.
//   - A first fragment cut inside an extension header that another
//     extension header follows: Linux drops a first fragment that does not
//     hold the whole header chain through UDP (RFC 8200 4.5,
//     ipv6frag_thdr_truncated), but that check walks with
//     ipv6_skip_exthdr, which fails (-1, "not truncated") when the next
//     header starts past the fragment, so such a fragment is reassembled
//     and the datagram delivered. readPacket walks the first fragment,
//     finds the destination options header longer than the rest, and
//     drops the packet; the later fragment is never read.
func TestRedTeamReleasesDhcpdActsOnAreReported(t *testing.T) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	release := clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 9, pdA).ToBytes()
	nested := release
	for range relayDepth + 1 {
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
