package dhcp6

import (
	"encoding/binary"
	"net/netip"
	"slices"

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
// discard) may be judged all the same - a false report is one more the
// attacker could have sent in the clear - but nothing a server's kernel
// delivers is skipped. UDP checksums are not checked for that reason too:
// a packet from a veth peer or a checksum-offloading NIC carries none yet.

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
	// part in the first fragment.
	Payload []byte
	// Partial: the packet is the first fragment of a longer datagram (the
	// rest, which a server's kernel reassembles, is not read).
	Partial bool
}

// readPacket reads pkt, an IPv6 packet (the network layer, as a packet
// socket of type SOCK_DGRAM gives it), for a UDP datagram to port 547 of
// one of the serverGroups; ok is false for anything
// else, for a fragment after the first (its first fragment was judged),
// and for what no kernel delivers (shorter than its headers say). Each
// extension header is at least 8 bytes, so the walk is bounded by the
// packet's length.
func readPacket(pkt []byte) (d datagram, ok bool) {
	if len(pkt) < 40 || pkt[0]>>4 != 6 || !slices.Contains(serverGroups[:], netip.AddrFrom16([16]byte(pkt[24:40]))) {
		return datagram{}, false
	}
	n := int(binary.BigEndian.Uint16(pkt[4:]))
	if len(pkt) < 40+n {
		return datagram{}, false
	}
	next, b := pkt[6], pkt[40:40+n]
	for next != nhUDP {
		var size int
		switch next {
		case nhHopByHop, nhRouting, nhDestOpts:
			if len(b) < 8 {
				return datagram{}, false
			}
			size = (int(b[1]) + 1) * 8
		case nhAH:
			if len(b) < 8 {
				return datagram{}, false
			}
			size = (int(b[1]) + 2) * 4
		case nhFragment:
			if len(b) < 8 {
				return datagram{}, false
			}
			offset, more := binary.BigEndian.Uint16(b[2:])&^7, b[3]&1 == 1
			if offset != 0 {
				return datagram{}, false
			}
			d.Partial = d.Partial || more // an atomic fragment is whole
			size = 8
		default: // ESP, No Next Header, ICMPv6, anything else: no UDP to read
			return datagram{}, false
		}
		if len(b) < size {
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
// kernel, on the network layer: it keeps IPv6 packets to ff02::1:2,
// ff05::1:3 (the serverGroups), ff02::1:3 or ff05::1:2 (which readPacket
// drops: one compare fewer per word) whose next header is UDP to port 547 or an extension header
// (readPacket walks those), and drops everything else before it is queued
// - so the agent wakes for the link's DHCPv6 client messages, not its every
// packet. It keeps a superset of what readPacket reads (FuzzReadPacket).
func serversFilter() []bpf.Instruction {
	const udp, keep, drop = 21, 23, 24 // where the jumps land
	skip := func(from, to int) uint8 { return uint8(to - from - 1) }
	return []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: 0, Size: 1},
		/* 1 */ bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 4},
		/* 2 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 6, SkipTrue: skip(2, drop)},
		/* 3 */ bpf.LoadAbsolute{Off: 24, Size: 4},
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xff020000, SkipTrue: skip(4, 6)},
		/* 5 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0xff050000, SkipTrue: skip(5, drop)},
		/* 6 */ bpf.LoadAbsolute{Off: 28, Size: 4},
		/* 7 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: skip(7, drop)},
		/* 8 */ bpf.LoadAbsolute{Off: 32, Size: 4},
		/* 9 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: skip(9, drop)},
		/* 10 */ bpf.LoadAbsolute{Off: 36, Size: 4},
		/* 11 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x00010002, SkipTrue: skip(11, 13)},
		/* 12 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x00010003, SkipTrue: skip(12, drop)},
		/* 13 */ bpf.LoadAbsolute{Off: 6, Size: 1}, // the next header
		/* 14 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhUDP, SkipTrue: skip(14, udp)},
		/* 15 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhHopByHop, SkipTrue: skip(15, keep)},
		/* 16 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhRouting, SkipTrue: skip(16, keep)},
		/* 17 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhFragment, SkipTrue: skip(17, keep)},
		/* 18 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhDestOpts, SkipTrue: skip(18, keep)},
		/* 19 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nhAH, SkipTrue: skip(19, keep)},
		/* 20 */ bpf.Jump{Skip: uint32(skip(20, drop))},
		/* 21 */ bpf.LoadAbsolute{Off: 42, Size: 2}, // UDP right after the header: its destination port
		/* 22 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ServerPort, SkipTrue: skip(22, drop)},
		/* 23 */ bpf.RetConstant{Val: 1 << 18}, // keep, whole
		/* 24 */ bpf.RetConstant{Val: 0}, // drop
	}
}
