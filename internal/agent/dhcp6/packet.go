package dhcp6

import (
	"encoding/binary"

	"golang.org/x/net/bpf"
)

// The Watch hears the link below the UDP layer: a node that runs a DHCPv6
// server or relay of its own may hold port 547 without SO_REUSEADDR, and
// then no socket of the agent's can bind it (the agent heard nothing, and
// a forged Release on that node's link went unreported). A packet socket
// takes its copy of every IPv6 packet on the link whatever holds the port,
// so the agent reads the network layer itself: the IPv6 header, the
// extension headers a server's kernel walks before UDP (a hop-by-hop
// header must not hide a Release), and the UDP header.
//
// It reads leniently, as the kernel before a server would at most: what
// the kernel would drop (a bad UDP checksum, an option whose type says
// discard, a first fragment cut before UDP) may be judged all the same - a
// false report is one more the attacker could have sent in the clear - so
// that of what reaches this node, nothing a server's kernel would deliver
// is skipped. UDP checksums are not checked for that reason too: a packet
// from a veth peer or a checksum-offloading NIC carries none yet. What
// never reaches the node (unicast to the server, a group a snooping switch
// forwards to the server alone) or what the socket's queue drops in a
// flood is not heard.

// IPv6 next-header values the walk knows.
const (
	nhHopByHop = 0
	nhUDP      = 17
	nhRouting  = 43
	nhFragment = 44
	nhAH       = 51
	nhDestOpts = 60
)

// datagram is what a packet heard on the link carries to the servers'
// port.
type datagram struct {
	// Payload is the UDP payload: the DHCPv6 message, or with Partial its
	// part in the first fragment - none when the first fragment ends
	// inside its header chain, before the UDP header.
	Payload []byte
	// Partial: the packet is the first fragment of a longer datagram (the
	// rest, which a server's kernel reassembles, is not read).
	Partial bool
}

// readPacket reads pkt, an IPv6 packet (the network layer, as a packet
// socket of type SOCK_DGRAM gives it), for a UDP datagram to port 547 of
// any multicast group (serversFilter says why any); ok is false for
// anything else (unicast included: the node hears only its own), for a
// fragment after the first (its first fragment was judged), and for what
// no kernel delivers (shorter than its headers say). Each extension header
// is at least 8 bytes, so the walk is bounded by the packet's length.
func readPacket(pkt []byte) (d datagram, ok bool) {
	if len(pkt) < 40 || pkt[0]>>4 != 6 || pkt[24] != 0xff {
		return datagram{}, false
	}
	n := int(binary.BigEndian.Uint16(pkt[4:]))
	if len(pkt) < 40+n {
		return datagram{}, false
	}
	next, b := pkt[6], pkt[40:40+n]
	for next != nhUDP {
		size := 8 // the least of any
		switch next {
		case nhHopByHop, nhRouting, nhDestOpts:
			if len(b) >= 2 {
				size = (int(b[1]) + 1) * 8
			}
		case nhAH:
			if len(b) >= 2 {
				size = (int(b[1]) + 2) * 4
			}
		case nhFragment:
			if len(b) >= 8 {
				offset, more := binary.BigEndian.Uint16(b[2:])&^7, b[3]&1 == 1
				if offset != 0 {
					return datagram{}, false
				}
				d.Partial = d.Partial || more // an atomic fragment is whole
			}
		default: // ESP, No Next Header, ICMPv6, anything else: no UDP to read
			return datagram{}, false
		}
		if len(b) < size {
			// A first fragment may end inside its header chain, and Linux
			// reassembles it when the header it ends in is not the last
			// before UDP (its check, ipv6frag_thdr_truncated, gives up
			// when it cannot read the next header): a datagram whose
			// port and message the first fragment does not show.
			if d.Partial {
				return datagram{Partial: true}, true
			}
			return datagram{}, false
		}
		next, b = b[0], b[size:]
	}
	if len(b) < 8 || binary.BigEndian.Uint16(b[2:]) != ServerPort {
		return datagram{}, false
	}
	length := int(binary.BigEndian.Uint16(b[4:]))
	switch {
	case d.Partial:
		d.Payload = b[8:] // the length is the whole datagram's
	case length < 8 || length > len(b):
		return datagram{}, false
	default:
		d.Payload = b[8:length]
	}
	return d, true
}

// serversFilter is the classic BPF program the packet socket runs in the
// kernel, on the network layer: it keeps IPv6 packets to any multicast
// group whose next header is UDP to port 547 or an extension header
// (readPacket walks those), and drops everything else before it is queued
// - so the agent wakes for the link's DHCPv6 client messages, not its every
// packet. Any group, not only the servers': a server bound to [::]:547 (as
// ISC dhcpd is) is handed the datagrams to every group its link joined,
// all nodes (ff02::1) and all routers (ff02::2, ff05::2) among them, and
// takes any multicast destination for a client's multicast. It keeps a
// superset of what readPacket reads (FuzzReadPacket).
func serversFilter() []bpf.Instruction {
	const udp, keep, drop = 13, 15, 16 // where the jumps land
	skip := func(from, to int) uint8 { return uint8(to - from - 1) }
	return []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: 0, Size: 1},
		/* 1 */ bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 4},
		/* 2 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 6, SkipTrue: skip(2, drop)},
		/* 3 */ bpf.LoadAbsolute{Off: 24, Size: 1}, // the destination's first byte
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0xff, SkipTrue: skip(4, drop)},
		/* 5 */ bpf.LoadAbsolute{Off: 6, Size: 1}, // the next header
		/* 6 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhUDP, SkipTrue: skip(6, udp)},
		/* 7 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhHopByHop, SkipTrue: skip(7, keep)},
		/* 8 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhRouting, SkipTrue: skip(8, keep)},
		/* 9 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhFragment, SkipTrue: skip(9, keep)},
		/* 10 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhDestOpts, SkipTrue: skip(10, keep)},
		/* 11 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhAH, SkipTrue: skip(11, keep)},
		/* 12 */ bpf.Jump{Skip: uint32(skip(12, drop))},
		/* 13 */ bpf.LoadAbsolute{Off: 42, Size: 2}, // UDP right after the header: its destination port
		/* 14 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ServerPort, SkipTrue: skip(14, drop)},
		/* 15 */ bpf.RetConstant{Val: 1 << 18}, // keep, whole
		/* 16 */ bpf.RetConstant{Val: 0}, // drop
	}
}
