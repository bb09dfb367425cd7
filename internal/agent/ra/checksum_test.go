package ra

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"

	"github.com/renumber/renumber/internal/agent/vethtest"
)

func TestVerifyChecksum(t *testing.T) {
	src := netip.MustParseAddr("fe80::1")
	good, err := ndp.MarshalMessageChecksum(ra(1), src, allNodes)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-1] ^= 0x01
	odd := append([]byte(nil), good[:len(good)-1]...) // odd length: padded with a zero
	odd[2], odd[3] = 0, 0
	sum := checksum(odd, src, allNodes)
	odd[2], odd[3] = byte(sum>>8), byte(sum)
	for _, tc := range []struct {
		name     string
		b        []byte
		src, dst netip.Addr
		ok       bool
	}{
		{"as marshalled with its checksum", good, src, allNodes, true},
		{"the source zoned, as read", good, src.WithZone("eth0"), allNodes, true},
		{"an odd length", odd, src, allNodes, true},
		{"one bit flipped", flipped, src, allNodes, false},
		{"another source (a replay's checksum does not follow it)", good, netip.MustParseAddr("fe80::2"), allNodes, false},
		{"sent to this node alone, not all nodes", good, src, netip.MustParseAddr("fe80::99"), false},
		{"no destination from the kernel", good, src, netip.Addr{}, false},
		{"too short", good[:3], src, allNodes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifyChecksum(tc.b, tc.src, tc.dst)
			if (err == nil) != tc.ok {
				t.Fatalf("verifyChecksum: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// badChecksumSender opens a raw ICMPv6 socket on tx whose checksum the
// kernel leaves as written (IPV6_CHECKSUM -1 at SOL_RAW): what any host on
// the link can send. The function returned sends one RA whose checksum does
// not add up.
func badChecksumSender(t *testing.T, v *vethtest.Pair) func() {
	t.Helper()
	txaddr := interfaceAddr(t, v, "tx")
	var pc *ipv6.PacketConn
	v.Do(t, func() error {
		ic, err := net.ListenIP("ip6:ipv6-icmp", &net.IPAddr{IP: txaddr.AsSlice(), Zone: "tx"})
		if err != nil {
			return err
		}
		pc = ipv6.NewPacketConn(ic)
		return pc.SetChecksum(false, -1)
	})
	t.Cleanup(func() { pc.Close() })
	b, err := ndp.MarshalMessage(ra(0xbad))
	if err != nil {
		t.Fatal(err)
	}
	b[2], b[3] = 0xde, 0xad
	return func() {
		if _, err := pc.WriteTo(b, &ipv6.ControlMessage{HopLimit: ndp.HopLimit}, &net.IPAddr{IP: allNodes.AsSlice(), Zone: "tx"}); err != nil {
			t.Fatal(err)
		}
	}
}

// One RA with a bad checksum, from any host on the link, is an invalid
// message: not a drop (Lost would make the agent forget every change
// waiting to be corroborated), and not in the way of the good RA queued
// behind it, which is handed over before the link is reported read. The
// listener's own solicitation still carries a checksum a router's kernel
// accepts.
func TestListenerTakesABadChecksumForAnInvalidMessageNotALoss(t *testing.T) {
	v := vethtest.New(t, "rxtime")
	tx := speaker(t, v)
	// tx hears all routers' group, as a router does.
	if err := tx.JoinGroup(allRouters); err != nil {
		t.Fatal(err)
	}
	send := badChecksumSender(t, v)
	l, ras, reports := startListener(t, v)
	solicitedAfterRead(t, reports)
	if err := tx.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for {
		m, _, _, err := tx.ReadFrom()
		if err != nil {
			t.Fatalf("no solicitation the router's kernel accepts: %v", err)
		}
		if _, ok := m.(*ndp.RouterSolicitation); ok {
			break
		}
	}
	// One RA in the handler, blocked (the agent busy): the bad one and a
	// good one queue behind it.
	firstHandedOver(t, tx, ras)
	invalid, dropped := metricInvalid.With("rx").Value(), metricDropped.With("rx").Value()
	send()
	if err := tx.WriteTo(ra(1), nil, allNodes); err != nil {
		t.Fatal(err)
	}
	synced := time.Now()
	l.Sync()
	var got []string
	for {
		select {
		case h := <-ras:
			if h.prefix == prefixOf(1) {
				got = append(got, "heard the good RA")
			}
			continue
		case r := <-reports:
			if r.kind == "lost" {
				got = append(got, "lost")
			}
			if r.kind != "read" || r.at.Before(synced) {
				continue
			}
			got = append(got, "read")
		}
		break
	}
	if diff := cmp.Diff([]string{"heard the good RA", "read"}, got); diff != "" {
		t.Errorf("after a bad checksum and a good RA (-want +got):\n%s", diff)
	}
	if d := metricInvalid.With("rx").Value() - invalid; d != 1 {
		t.Errorf("invalid messages counted: %d, want 1", d)
	}
	if d := metricDropped.With("rx").Value() - dropped; d != 0 {
		t.Errorf("drops counted: %d, want 0", d)
	}
}
