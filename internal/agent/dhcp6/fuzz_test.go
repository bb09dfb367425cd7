package dhcp6

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"

	"github.com/insomniacslk/dhcp/iana"
	clocktesting "k8s.io/utils/clock/testing"
	"net"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Anything on the link can send to the client's port: no datagram may crash
// the agent, and a reply's lease always satisfies T1 <= T2 and a valid
// prefix.
func FuzzOffer(f *testing.F) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		f.Fatal(err)
	}
	reply := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply}
	reply.AddOption(dhcpv6.OptClientID(id.DUID))
	reply.AddOption(dhcpv6.OptServerID(&dhcpv6.DUIDLL{LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}))
	ia := &dhcpv6.OptIAPD{IaId: id.IAID, T1: time.Minute, T2: 2 * time.Minute}
	ia.Options.Add(&dhcpv6.OptIAPrefix{PreferredLifetime: time.Hour, ValidLifetime: 2 * time.Hour,
		Prefix: &net.IPNet{IP: net.ParseIP("2001:db8:a00::"), Mask: net.CIDRMask(56, 128)}})
	reply.AddOption(ia)
	f.Add(reply.ToBytes())
	f.Add([]byte{7, 0, 0, 0})
	f.Add([]byte{})
	c := &Client{ID: id}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := dhcpv6.MessageFromBytes(b)
		if err != nil {
			return
		}
		l, err := c.offer(m, time.Unix(0, 0))
		if err != nil {
			return
		}
		if !l.Prefix.IsValid() || l.T1 > l.T2 || l.T1 <= 0 {
			t.Errorf("lease %+v", l)
		}
	})
}

// autoClock is a fake clock that moves on by itself: every wait returns at
// once, and the time moves by what it would have waited.
type autoClock struct{ *clocktesting.FakeClock }

func (c autoClock) After(d time.Duration) <-chan time.Time {
	c.Step(max(d, 0))
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

func (c autoClock) Sleep(d time.Duration) { c.Step(max(d, 0)) }

// scripted is a link where the fuzzer decides, read by read, what comes back
// to the client: silence until the deadline, garbage, or an answer to the
// last message sent - from the trusted server or another host, with any
// prefix, status, lifetimes, timers and preference, to the right
// transaction or not. It remembers which prefixes each kind of sender
// offered. When the script runs out, the run ends.
type scripted struct {
	clk      autoClock
	script   []byte
	deadline time.Time
	sent     *dhcpv6.Message
	end      context.CancelFunc
	servers  [3]dhcpv6.DUID // [0] is the trusted one
	offered  [3]map[netip.Prefix]bool
}

func (s *scripted) WriteTo(b []byte, _ net.Addr) (int, error) {
	m, err := dhcpv6.MessageFromBytes(b)
	if err != nil {
		return 0, err
	}
	s.sent = m
	return len(b), nil
}

func (s *scripted) SetReadDeadline(t time.Time) error { s.deadline = t; return nil }
func (s *scripted) Close() error                      { return nil }

func (s *scripted) ReadFrom(b []byte) (int, net.Addr, error) {
	if len(s.script) < 4 || s.sent == nil {
		s.end()
		return 0, nil, net.ErrClosed
	}
	op, x, y, z := s.script[0], s.script[1], s.script[2], s.script[3]
	s.script = s.script[4:]
	switch op % 4 {
	case 0: // silence
		if s.deadline.After(s.clk.Now()) {
			s.clk.SetTime(s.deadline)
		}
		return 0, nil, os.ErrDeadlineExceeded
	case 1: // garbage
		return copy(b, s.script[:min(len(s.script), int(x%64))]), nil, nil
	}
	from := int(x % 3) // 0: the trusted server
	a := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: s.sent.TransactionID}
	if s.sent.MessageType == dhcpv6.MessageTypeSolicit {
		a.MessageType = dhcpv6.MessageTypeAdvertise
	}
	if op&0x10 != 0 {
		a.TransactionID[0] ^= 1
	}
	if op&0x20 == 0 {
		a.AddOption(dhcpv6.OptClientID(s.sent.Options.ClientID()))
	}
	a.AddOption(dhcpv6.OptServerID(s.servers[from]))
	a.AddOption(dhcpv6.OptPreference([]uint8{0, 128, 255, 7}[y>>6]))
	if op&0x40 != 0 {
		a.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoPrefixAvail})
	}
	ia := &dhcpv6.OptIAPD{IaId: s.sent.Options.OneIAPD().IaId, T1: time.Duration(x>>2) * time.Second, T2: time.Duration(z>>4) * 10 * time.Second}
	lifetimes := []time.Duration{0, 4 * time.Second, time.Hour, 0xffffffff * time.Second}
	switch y % 5 {
	case 0:
		ia.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoBinding})
	case 1:
	default:
		p := []netip.Prefix{pdA, pdB, pdX}[y%5-2]
		valid, preferred := lifetimes[z%4], lifetimes[(z>>2)%4]
		ia.Options.Add(&dhcpv6.OptIAPrefix{PreferredLifetime: preferred, ValidLifetime: valid,
			Prefix: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}})
		if valid > 0 {
			s.offered[from][p] = true
		}
	}
	a.AddOption(ia)
	return copy(b, a.ToBytes()), nil, nil
}

// Whatever the link answers, and in whatever order, the client never binds a
// prefix that no server it trusts offered, reports an end only of what it
// reported bound, and stops when asked.
func FuzzExchange(f *testing.F) {
	f.Add(true, []byte{2, 0, 2, 0xff, 2, 0, 2, 0xff, 0, 0, 0, 0, 2, 0, 3, 0xff, 2, 0, 3, 0xff, 2, 1, 4, 0xff})
	f.Add(false, []byte{2, 1, 0x82, 0xff, 2, 0, 2, 0xff, 3, 0, 2, 0xff, 0, 0, 0, 0, 2, 1, 4, 0xff, 2, 0, 0, 0, 2, 0, 0, 0})
	f.Add(true, []byte{1, 20, 0, 0, 0x12, 0, 2, 0xff, 0x22, 0, 2, 0xff, 0x42, 0, 2, 0xff, 2, 0, 2, 0})
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pinned bool, script []byte) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		clk := autoClock{clocktesting.NewFakeClock(time.Unix(1e9, 0))}
		link := &scripted{clk: clk, script: script, end: cancel}
		for i := range link.servers {
			link.servers[i] = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)}}
			link.offered[i] = map[netip.Prefix]bool{}
		}
		var held netip.Prefix
		c := &Client{Link: "eth0", Length: 56, ID: id, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Dial: func() (Conn, net.Addr, error) { return link, &net.UDPAddr{IP: net.IPv6loopback, Port: 547}, nil },
			Report: func(p netip.Prefix, _ time.Duration, removed bool, _ time.Time) {
				switch {
				case removed && p != held:
					t.Errorf("ended %s while holding %s", p, held)
				case removed:
					held = netip.Prefix{}
				case pinned && !link.offered[0][p]:
					t.Errorf("bound %s, which the trusted server never offered", p)
				case !link.offered[0][p] && !link.offered[1][p] && !link.offered[2][p]:
					t.Errorf("bound %s, which nobody offered", p)
				default:
					held = p
				}
			}}
		if pinned {
			c.Servers = [][]byte{link.servers[0].ToBytes()}
		}
		if got := c.Run(ctx); got != held {
			t.Errorf("Run returned %s, the last report left %s held", got, held)
		}
	})
}
