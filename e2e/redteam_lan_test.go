package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	"github.com/vishvananda/netns"

	"github.com/renumber/renumber/internal/metrics"
)

// TestALANHostIsOneClientOfTheMetricsPort (red team, issue 42 item 14): the
// metrics port caps connections per client, a client being a /64 (or /24),
// because "a host on the LAN can take any free address of its subnet, but
// cannot complete a handshake from outside it, where no route brings the
// answer back" (internal/metrics Client, docs/security.md). A host on the
// LAN can bring the route: an RA (from any link-local source; router
// lifetime 0, so it is nobody's default router) whose prefix options say
// 2001:db8:f00:N::/64 is on-link, addresses not to be formed, is taken by
// every node's kernel (accept_ra=2, as SLAAC nodes have), and the node then
// answers those addresses on the link directly. One host becomes any number
// of clients, 8 connections each, up to the port's cap of 64 - past which the
// oldest connection, the scraper's among them, is closed, and each of which
// can hold a 1 MiB header (TestHeadersBeingSentCostLittleMemory).
//
// The port here is internal/metrics' own server with its caps (NewConns),
// on node1's address on the LAN; the host is the world's rogue router's
// namespace, with a route to the LAN only.
func TestALANHostIsOneClientOfTheMetricsPort(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA) // node1 has a default router, the real one
	node := w.Net.Nodes[0]
	rogue, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	conns := metrics.NewConns("redteam")
	target := netip.AddrPortFrom(node.ControlAddr, 9470)
	inNetns(t, node.NS, func() {
		l, err := net.Listen("tcp", target.String())
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		go func() {
			_ = metrics.Serve(sctx, slog.New(slog.NewTextHandler(io.Discard, nil)), metrics.Endpoint{Listener: l, Conns: conns}, metrics.NewRegistry(), nil, nil, nil)
		}()
	})

	const subnets = 9
	from := func(n int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("2001:db8:f00:%x::1", n)) }
	for n := 1; n <= subnets; n++ {
		if out, err := exec.Command("ip", "-n", rogue.NS, "addr", "add", from(n).String()+"/64", "dev", "eth0", "nodad").CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	dial := func(src netip.Addr, timeout time.Duration) (net.Conn, error) {
		var c net.Conn
		var err error
		inNetns(t, rogue.NS, func() {
			d := net.Dialer{Timeout: timeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
			c, err = d.Dial("tcp", target.String())
		})
		return c, err
	}

	// Control: from outside the LAN's /64, no answer comes back.
	if c, err := dial(from(1), 3*time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("control: a handshake from %s completed before any RA", from(1))
	}

	// One RA: these /64s are on-link.
	ra := &ndp.RouterAdvertisement{CurrentHopLimit: 64}
	for n := 1; n <= subnets; n++ {
		ra.Options = append(ra.Options, &ndp.PrefixInformation{PrefixLength: 64, Prefix: netip.PrefixFrom(from(n), 64).Masked().Addr(), OnLink: true,
			ValidLifetime: time.Hour, PreferredLifetime: 0})
	}
	b, err := ndp.MarshalMessage(ra)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a handshake from "+from(1).String(), func() (bool, string) {
		if err := rogue.SendRA(b); err != nil {
			return false, err.Error()
		}
		c, err := dial(from(1), time.Second)
		if err != nil {
			return false, err.Error()
		}
		held = append(held, c)
		return true, ""
	})
	for n := 1; n <= subnets; n++ {
		for len(held) < n*conns.PerClient {
			c, err := dial(from(n), 3*time.Second)
			if err != nil {
				t.Fatalf("from %s: %v", from(n), err)
			}
			held = append(held, c)
		}
	}
	time.Sleep(time.Second) // the server accepts at its own pace
	t.Logf("one LAN host opened %d connections from %d /64s; the port holds %d (cap %d, %d a client)",
		len(held), subnets, conns.Open(), conns.Max, conns.PerClient)
	if conns.Open() > conns.PerClient {
		t.Errorf("one host on the LAN holds %d connections to the metrics port, past the %d of one client: each on-link /64 it advertised is a client of its own",
			conns.Open(), conns.PerClient)
	}
}

// inNetns runs f on a thread in the network namespace named ns (sockets it
// opens stay there).
func inNetns(t *testing.T, ns string, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = orig.Close() }()
	target, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = target.Close() }()
	if err := netns.Set(target); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(err)
		}
	}()
	f()
}
