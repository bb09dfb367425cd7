package dhcp6

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"golang.org/x/net/bpf"
)

// ext is one IPv6 extension header: its type and body after the
// next-header byte (and, but for a fragment header, the length byte),
// padded to the header's unit.
type ext struct {
	kind byte
	body []byte
}

// ipv6Packet is an IPv6 packet to dst from fe80::bad carrying exts, then a
// UDP datagram to port with payload; the UDP length says udpLen when it is
// not 0.
func ipv6Packet(dst netip.Addr, exts []ext, port uint16, payload []byte, udpLen int) []byte {
	var chain []byte
	next := byte(nhUDP)
	for i := len(exts) - 1; i >= 0; i-- {
		e := exts[i]
		var h []byte
		switch e.kind {
		case nhFragment:
			h = append([]byte{next, 0}, (append(bytes.Clone(e.body), make([]byte, 6)...))[:6]...)
		case nhAH: // length in 4-byte units, minus 2; 8-byte aligned in IPv6
			body := append(bytes.Clone(e.body), make([]byte, (8-(len(e.body)+2)%8)%8)...)
			h = append([]byte{next, byte((len(body)+2)/4 - 2)}, body...)
		default: // length in 8-byte units, minus 1
			body := append(bytes.Clone(e.body), make([]byte, (8-(len(e.body)+2)%8)%8)...)
			h = append([]byte{next, byte((len(body)+2)/8 - 1)}, body...)
		}
		chain, next = append(h, chain...), e.kind
	}
	if udpLen == 0 {
		udpLen = 8 + len(payload)
	}
	udp := binary.BigEndian.AppendUint16(nil, ClientPort)
	udp = binary.BigEndian.AppendUint16(udp, port)
	udp = binary.BigEndian.AppendUint16(udp, uint16(udpLen))
	udp = append(udp, 0, 0) // no checksum: not checked
	body := append(append(chain, udp...), payload...)
	pkt := []byte{0x60, 0, 0, 0, 0, 0, next, 1}
	pkt = binary.BigEndian.AppendUint16(pkt[:4], uint16(len(body)))
	pkt = append(pkt, next, 1)
	src, to := netip.MustParseAddr("fe80::bad").As16(), dst.As16()
	pkt = append(append(append(pkt, src[:]...), to[:]...), body...)
	return pkt
}

// fragment is a Fragment header's body: offset (8-byte units) and the
// More flag.
func fragment(offset uint16, more bool) ext {
	v := offset << 3
	if more {
		v |= 1
	}
	return ext{kind: nhFragment, body: binary.BigEndian.AppendUint16(nil, v)}
}

// keeps runs the kernel's filter on pkt.
func keeps(t testing.TB, pkt []byte) bool {
	t.Helper()
	vm, err := bpf.NewVM(serversFilter())
	if err != nil {
		t.Fatal(err)
	}
	n, err := vm.Run(pkt)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// What the Watch makes of the packets its packet socket hears: a Release
// under the client's DUID is reported behind any extension headers a
// server's kernel walks (a hop-by-hop header, destination options, a
// routing header, AH, an atomic fragment), and in a first fragment that
// shows it or hides its client, or that ends inside its header chain
// (Linux reassembles one that ends in a header another follows); the
// kernel's filter keeps each. Any multicast group counts (a server bound
// to [::]:547 is handed every group its link joined); nothing else to the
// group, nothing to another port or a unicast address, and no later
// fragment is reported.
func TestTheWatchHearsAReleaseBehindAnyHeaderChain(t *testing.T) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := IdentityFor("00000000-0000-4000-8000-000000000001", "home")
	release := clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 9, pdA).ToBytes()
	theirs := clientMessage(dhcpv6.MessageTypeRelease, other, other.IAID, 9, pdA).ToBytes()
	renew := clientMessage(dhcpv6.MessageTypeRenew, id, id.IAID, 9, pdA).ToBytes()
	// padded puts 64 bytes of an unknown option before the Client ID.
	padded := append([]byte{byte(dhcpv6.MessageTypeRelease), 9, 2, 3, 0x7f, 0x7f, 0, 60}, make([]byte, 60)...)
	padded = append(padded, release[4:]...)
	hbh := ext{kind: nhHopByHop, body: []byte{5, 2, 0, 0}} // Router Alert
	group := allServers
	for _, c := range []struct {
		name  string
		pkt   []byte
		heard bool // the Watch reports it
		kept  bool // the kernel's filter keeps it
	}{
		{"a Release", ipv6Packet(group, nil, ServerPort, release, 0), true, true},
		{"behind a hop-by-hop header", ipv6Packet(group, []ext{hbh}, ServerPort, release, 0), true, true},
		{"behind a 2 KiB hop-by-hop header", ipv6Packet(group, []ext{{nhHopByHop, make([]byte, 2046)}}, ServerPort, release, 0), true, true},
		{"behind destination options, routing, AH, destination options", ipv6Packet(group, []ext{{nhDestOpts, nil}, {nhRouting, []byte{0, 0}}, {nhAH, make([]byte, 10)}, {nhDestOpts, nil}}, ServerPort, release, 0), true, true},
		{"in an atomic fragment", ipv6Packet(group, []ext{hbh, fragment(0, false)}, ServerPort, release, 0), true, true},
		{"in a first fragment", ipv6Packet(group, []ext{fragment(0, true)}, ServerPort, release, 8+len(release)+64), true, true},
		{"padded, its client in the next fragment", ipv6Packet(group, []ext{fragment(0, true)}, ServerPort, padded[:24], 8+len(padded)), true, true},
		{"a first fragment of UDP alone", ipv6Packet(group, []ext{fragment(0, true)}, ServerPort, nil, 8+len(release)), true, true},
		{"a relayed Release, its message in the next fragment", ipv6Packet(group, []ext{fragment(0, true)}, ServerPort, relayed(release)[:40], 8+len(relayed(release))), true, true},
		{"a fragment after the first", ipv6Packet(group, []ext{fragment(8, false)}, ServerPort, release, 0), false, true},
		{"another client's Release in a first fragment", ipv6Packet(group, []ext{fragment(0, true)}, ServerPort, theirs, 8+len(theirs)+64), false, true},
		{"a first fragment of an Information-Request", ipv6Packet(group, []ext{fragment(0, true)}, ServerPort, []byte{byte(dhcpv6.MessageTypeInformationRequest), 1, 2, 3}, 200), false, true},
		{"a Renew for the prefix held", ipv6Packet(group, nil, ServerPort, renew, 0), false, true},
		{"another client's Release", ipv6Packet(group, nil, ServerPort, theirs, 0), false, true},
		{"to the client port", ipv6Packet(group, nil, ClientPort, release, 0), false, false},
		{"to all nodes (ff02::1: dhcpd's [::]:547 gets every group its link joined)", ipv6Packet(netip.MustParseAddr("ff02::1"), nil, ServerPort, release, 0), true, true},
		{"to all routers (ff02::2)", ipv6Packet(netip.MustParseAddr("ff02::2"), nil, ServerPort, release, 0), true, true},
		{"to All_DHCP_Servers (ff05::1:3)", ipv6Packet(siteServers, nil, ServerPort, release, 0), true, true},
		{"to ff05::1:2", ipv6Packet(netip.MustParseAddr("ff05::1:2"), nil, ServerPort, release, 0), true, true},
		{"to ff02::1:3", ipv6Packet(netip.MustParseAddr("ff02::1:3"), nil, ServerPort, release, 0), true, true},
		{"to ff02::2:2", ipv6Packet(netip.MustParseAddr("ff02::2:2"), nil, ServerPort, release, 0), true, true},
		{"to a unicast address (the node hears only its own)", ipv6Packet(netip.MustParseAddr("fe80::1"), nil, ServerPort, release, 0), false, false},
		{"a first fragment ending inside a header another follows", firstFragmentCut([]ext{{nhDestOpts, make([]byte, 126)}, {nhDestOpts, nil}}, 64), true, true},
		{"a first fragment ending inside the header before UDP (Linux drops it; heard all the same)", firstFragmentCut([]ext{{nhDestOpts, make([]byte, 126)}}, 64), true, true},
		{"a first fragment ending inside AH", firstFragmentCut([]ext{{nhAH, make([]byte, 126)}}, 64), true, true},
		{"an atomic fragment ending inside a header (no kernel delivers it)", cutAfter(ipv6Packet(group, []ext{fragment(0, false), {nhDestOpts, make([]byte, 126)}, {nhDestOpts, nil}}, ServerPort, release, 0), 40+8+64), false, true},
		{"a later fragment ending inside a header", cutAfter(ipv6Packet(group, []ext{fragment(8, true), {nhDestOpts, make([]byte, 126)}, {nhDestOpts, nil}}, ServerPort, release, 0), 40+8+64), false, true},
		{"a UDP length past the packet", ipv6Packet(group, nil, ServerPort, release, len(release)+9), false, true},
		{"a UDP length short of a header", ipv6Packet(group, nil, ServerPort, release, 7), false, true},
		{"behind ESP", ipv6Packet(group, []ext{{50, make([]byte, 6)}}, ServerPort, release, 0), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, _ := loggedWatch(t)
			if got := w.HeardPacket(c.pkt, time.Unix(1e9, 0)); got != c.heard {
				t.Errorf("reported %v, want %v", got, c.heard)
			}
			if got := keeps(t, c.pkt); got != c.kept {
				t.Errorf("the filter keeps it: %v, want %v", got, c.kept)
			}
		})
	}
	for _, cut := range []int{0, 39, 40, 47} {
		pkt := ipv6Packet(group, nil, ServerPort, release, 0)[:cut]
		if _, ok := readPacket(pkt); ok {
			t.Errorf("%d bytes read", cut)
		}
	}
	short := ipv6Packet(group, nil, ServerPort, release, 0)
	if _, ok := readPacket(short[:len(short)-1]); ok {
		t.Error("a packet shorter than its payload length read")
	}
}

// firstFragmentCut is the first fragment, to ff02::1:2, of a datagram
// behind exts carrying a Release to port 547, holding keep bytes of what
// follows the fragment header.
func firstFragmentCut(exts []ext, keep int) []byte {
	pkt := ipv6Packet(allServers, append([]ext{fragment(0, true)}, exts...), ServerPort, make([]byte, 64), 0)
	return cutAfter(pkt, 40+8+keep)
}

// cutAfter is pkt cut to n bytes, its payload length saying so.
func cutAfter(pkt []byte, n int) []byte {
	pkt = bytes.Clone(pkt[:n])
	binary.BigEndian.PutUint16(pkt[4:], uint16(n-40))
	return pkt
}

// relayed is m in a Relay-Forward.
func relayed(m []byte) []byte {
	b := append([]byte{byte(dhcpv6.MessageTypeRelayForward), 0}, make([]byte, 32)...)
	b = binary.BigEndian.AppendUint16(b, uint16(dhcpv6.OptionRelayMsg))
	b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
	return append(b, m...)
}

// The attacker builds the packet: any chain of extension headers a
// server's kernel walks before UDP (hop-by-hop, destination options,
// routing, AH, each of any size and content), any options before the
// Client ID of a Release under the client's DUID, in a Relay-Forward or
// not, whole or cut into a first fragment anywhere past the UDP header.
// To either group a server hears. Whatever it builds, the kernel's filter
// keeps the packet and the Watch
// reports it. And on any bytes at all: no panic, and the filter keeps
// whatever readPacket reads a datagram from (its filter is a superset).
func FuzzReadPacket(f *testing.F) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		f.Fatal(err)
	}
	release := clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 9, pdA).ToBytes()
	f.Add([]byte{0, 5, 1, 0}, []byte{}, false, uint16(0), ipv6Packet(allServers, nil, ServerPort, release, 0))
	f.Add([]byte{60, 2, 9, 9, 43, 4, 0, 0, 51, 12, 1, 1}, []byte{0x7f, 0x7f, 0, 3, 1, 2, 3}, true, uint16(3), []byte{})
	f.Add([]byte{0, 255}, make([]byte, 300), false, uint16(1), ipv6Packet(allServers, []ext{fragment(0, true)}, ServerPort, nil, 100))
	f.Fuzz(func(t *testing.T, chain, pad []byte, relay bool, cut uint16, raw []byte) {
		group := serverGroups[cut>>15]
		if d, ok := readPacket(raw); ok && !keeps(t, raw) {
			t.Fatalf("read %d bytes, the filter drops the packet", len(d.Payload))
		}
		w := &Watch{ID: id, Link: "eth0", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		w.HeardPacket(raw, time.Unix(1e9, 0))

		var exts []ext
		for len(chain) >= 2 && len(exts) < 16 {
			kind := []byte{nhHopByHop, nhDestOpts, nhRouting, nhAH}[chain[0]%4]
			n := min(int(chain[1]), len(chain)-2)
			if kind == nhHopByHop && len(exts) > 0 {
				kind = nhDestOpts // the kernel reads hop-by-hop first only
			}
			exts = append(exts, ext{kind: kind, body: chain[2 : 2+n]})
			chain = chain[2+n:]
		}
		// pad as options before the Client ID: type 0x7f7f, each as long as it says.
		m := append([]byte{}, release[:4]...)
		for len(pad) > 0 {
			n := min(int(pad[0]), len(pad)-1)
			m = append(m, 0x7f, 0x7f, 0, byte(n))
			m, pad = append(m, pad[1:1+n]...), pad[1+n:]
		}
		m = append(m, release[4:]...)
		if relay {
			m = relayed(m)
		}
		if 8+len(m) > 0xffff {
			return
		}
		pkt := ipv6Packet(group, exts, ServerPort, m, 0)
		if cut%4 != 0 { // the first fragment, cut at an 8-byte boundary of the fragmentable part
			keep := int(cut) % (len(m)/8 + 1) * 8
			exts = append(exts, fragment(0, true))
			pkt = ipv6Packet(group, exts, ServerPort, m[:keep], 8+len(m))
		}
		if len(pkt) > 40+0xffff {
			return
		}
		if !keeps(t, pkt) {
			t.Fatal("the filter drops it")
		}
		if !w.HeardPacket(pkt, time.Unix(1e9, 0)) {
			t.Fatalf("a Release behind %d extension headers (cut %d of %d) not reported", len(exts), cut, len(m))
		}
	})
}

// What a flood of forged Releases to the group costs per packet (the
// kernel's filter drops all else before it is queued).
func BenchmarkHeardPacket(b *testing.B) {
	w, _ := loggedWatch(b)
	w.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	release := clientMessage(dhcpv6.MessageTypeRelease, w.ID, w.ID.IAID, 9, pdA).ToBytes()
	pkt := ipv6Packet(allServers, []ext{{nhHopByHop, []byte{5, 2, 0, 0}}}, ServerPort, release, 0)
	for b.Loop() {
		w.HeardPacket(pkt, time.Unix(1e9, 0))
	}
}

// What a flood of another client's messages costs per packet: first
// fragments to the group, each another client's Release, its Client ID
// whole, then 4-byte options to 1,400 bytes (the world's flood test).
func BenchmarkHeardAnotherClientsFragment(b *testing.B) {
	w, _ := loggedWatch(b)
	other, _ := IdentityFor("00000000-0000-4000-8000-000000000001", "home")
	m := clientMessage(dhcpv6.MessageTypeRelease, other, other.IAID, 9, pdA).ToBytes()
	for len(m) < 1400 {
		m = append(m, 0x7f, 0x7f, 0, 0)
	}
	pkt := ipv6Packet(allServers, []ext{fragment(0, true)}, ServerPort, m, 8+len(m)+64)
	for b.Loop() {
		if w.HeardPacket(pkt, time.Unix(1e9, 0)) {
			b.Fatal("reported")
		}
	}
}
