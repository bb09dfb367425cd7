package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/renumber/renumber/internal/metrics"
)

// TestALANHostIsOneClientOfTheMetricsPort (issue 42): the metrics port caps
// connections per client. A client was a /64 (or /24), on the reasoning
// that a host on the LAN can take any free address of its subnet but cannot
// complete a handshake from outside it, where no route brings the answer
// back. A host on the LAN can bring the route: an RA (from any link-local
// source; router lifetime 0, so it is nobody's default router) whose prefix
// options say 2001:db8:f00:N::/64 is on-link, addresses not to be formed, is
// taken by every node's kernel (accept_ra=2, as SLAAC nodes have), and the
// node then answers those addresses on the link directly. Found by a red
// team: one host, 8 connections from each of 9 /64s, held all 64, past
// which the oldest connection - the scraper's among them - is closed.
// Now every source the node answers on the link (or through a router the
// link named) is one client, as the kernel's route to it says
// (metrics.KernelRoutes, as the agent configures it): the host holds 8, and
// a connection from elsewhere - here the node's own address, as the
// kubelet's probes come - stays open and is answered.
//
// The port here is internal/metrics' own server with the agent's caps, on
// node1's address on the LAN; the host is the world's rogue router's
// namespace, with a route to the LAN only.
func TestALANHostIsOneClientOfTheMetricsPort(t *testing.T) {
	lanHostAsManyClients(t, "2001:db8:f00:%x::1", func(from []netip.Prefix) *ndp.RouterAdvertisement {
		ra := &ndp.RouterAdvertisement{CurrentHopLimit: 64} // these /64s are on-link
		for _, p := range from {
			ra.Options = append(ra.Options, &ndp.PrefixInformation{PrefixLength: 64, Prefix: p.Addr(), OnLink: true,
				ValidLifetime: time.Hour, PreferredLifetime: 0})
		}
		return ra
	})
}

// TestALANHostRoutingTheNodeIsOneClientOfTheMetricsPort: the same host
// without a prefix option, advertising itself a default router of high
// preference (router lifetime 30 min): node1 then answers every address off
// the LAN through it, and it answers from 9 /64s of the documentation
// prefix that are nobody's on the link. Those too are the link's one client
// (the kernel's route to them is the default one, which the link named).
func TestALANHostRoutingTheNodeIsOneClientOfTheMetricsPort(t *testing.T) {
	lanHostAsManyClients(t, "2001:db8:beef:%x::1", func([]netip.Prefix) *ndp.RouterAdvertisement {
		return &ndp.RouterAdvertisement{CurrentHopLimit: 64, RouterSelectionPreference: ndp.High, RouterLifetime: 30 * time.Minute}
	})
}

// lanHostAsManyClients has the world's rogue host send node1 the RA ra
// makes for 9 /64s (formatted from source, %x the 1-9), then open 8
// connections from each /64 to a metrics port with the agent's caps on
// node1's LAN address: it must hold no more than one client's 8, and a
// connection from node1's own address, opened before, is answered after.
func lanHostAsManyClients(t *testing.T, source string, ra func([]netip.Prefix) *ndp.RouterAdvertisement) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA) // node1 has a default router, the real one
	node := w.Net.Nodes[0]
	rogue, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	conns := metrics.NewConns("agent")
	nodeNS, err := netns.GetFromName(node.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodeNS.Close() })
	routes, err := netlink.NewHandleAt(nodeNS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = routes.Close() })
	conns.Routes = metrics.KernelRoutes{H: routes}.Route // the agent's, in node1's namespace
	target := netip.AddrPortFrom(node.ControlAddr, 9470)
	var accepted atomic.Int64
	inNetns(t, node.NS, func() {
		inner, err := net.Listen("tcp", target.String())
		if err != nil {
			t.Fatal(err)
		}
		l := &counting{Listener: inner, n: &accepted}
		sctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		go func() {
			_ = metrics.Serve(sctx, slog.New(slog.NewTextHandler(io.Discard, nil)), metrics.Endpoint{Listener: l, Conns: conns}, metrics.NewRegistry(), nil, nil, nil)
		}()
	})

	const subnets = 9
	from := func(n int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf(source, n)) }
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

	// The scraper's stand-in: a connection from node1's own address,
	// answered on loopback.
	var probe net.Conn
	inNetns(t, node.NS, func() {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(node.ControlAddr, 0))}
		if probe, err = d.Dial("tcp", target.String()); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { _ = probe.Close() })

	// Control: from outside the LAN's /64, no answer comes back (node1
	// answers it through the real router).
	if c, err := dial(from(1), 3*time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("control: a handshake from %s completed before any RA", from(1))
	}

	var prefixes []netip.Prefix
	for n := 1; n <= subnets; n++ {
		prefixes = append(prefixes, netip.PrefixFrom(from(n), 64).Masked())
	}
	b, err := ndp.MarshalMessage(ra(prefixes))
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
	// Every handshake completed was accepted (the probe's too): the caps
	// have acted on all of them.
	eventually(t, "the server accepted every connection", func() (bool, string) {
		return accepted.Load() == int64(len(held)+1), fmt.Sprintf("%d of %d", accepted.Load(), len(held)+1)
	})
	t.Logf("one LAN host opened %d connections from %d /64s; the port holds %d (cap %d, %d a client)",
		len(held), subnets, conns.Open(), conns.Max, conns.PerClient)
	if conns.Open() > conns.PerClient+1 {
		t.Errorf("one host on the LAN holds %d connections to the metrics port, past the %d of one client: each /64 it answers from is a client of its own",
			conns.Open()-1, conns.PerClient)
	}
	if _, err := fmt.Fprintf(probe, "GET /metrics HTTP/1.1\r\nHost: node\r\n\r\n"); err != nil {
		t.Fatalf("the probe's connection: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(probe), nil)
	if err != nil {
		t.Fatalf("the probe's connection, opened before the flood, was closed: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the probe's scrape: %s", resp.Status)
	}
}

// counting counts the connections it accepts.
type counting struct {
	net.Listener
	n *atomic.Int64
}

func (l *counting) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
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
