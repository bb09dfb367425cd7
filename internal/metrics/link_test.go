package metrics

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// A host on a link can take any address the node answers on that link, so
// the port counts the link as one client; what the node answers elsewhere
// (a Pod through the CNI) keeps its prefix's caps and budget.

func TestWhoIsAClient(t *testing.T) {
	for _, c := range []struct {
		name   string
		remote string
		route  Route
		routed bool
		want   string
	}{
		{"on the LAN's /64", "[2001:db8:1:2::66]:4000", Route{Link: "2", Direct: true}, true, "link 2"},
		{"on a /64 one RA marked on-link", "[2001:db8:f00:9::1]:4000", Route{Link: "2", Direct: true}, true, "link 2"},
		{"through a default router the link named", "[2001:db8:ffff::1]:4000", Route{Link: "2", Learned: true}, true, "link 2"},
		{"on the LAN's IPv4 subnet, however wide", "192.168.7.9:4000", Route{Link: "2", Direct: true}, true, "link 2"},
		{"a Pod through the CNI's route to its node", "[fd00:10:244:1::5]:41000", Route{Link: "2"}, true, "fd00:10:244:1::/64"},
		{"a Pod through the CNI's own link", "10.244.1.5:41000", Route{Link: "5"}, true, "10.244.1.0/24"},
		{"the node itself (no route: loopback)", "[2001:db8:1:2::10]:4000", Route{}, false, "2001:db8:1:2::/64"},
		{"an IPv4-mapped address is its IPv4 one", "[::ffff:10.244.1.5]:41000", Route{Link: "5"}, true, "10.244.1.0/24"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ClientOf(c.remote, c.route, c.routed); got != c.want {
				t.Errorf("ClientOf(%s, %+v, %v) = %q, want %q", c.remote, c.route, c.routed, got, c.want)
			}
		})
	}
}

func TestWhichKernelRoutesTheLinkChose(t *testing.T) {
	for _, c := range []struct {
		name               string
		gateway, isDefault bool
		protocol           int
		want               Route
	}{
		{"on-link (a prefix an RA or an address put there)", false, false, unix.RTPROT_RA, Route{Link: "2", Direct: true}},
		{"the default route", true, true, unix.RTPROT_RA, Route{Link: "2", Learned: true}},
		{"the default route DHCP set (IPv4)", true, true, unix.RTPROT_DHCP, Route{Link: "2", Learned: true}},
		{"a route an RA's route information set", true, false, unix.RTPROT_RA, Route{Link: "2", Learned: true}},
		{"a redirect", true, false, unix.RTPROT_REDIRECT, Route{Link: "2", Learned: true}},
		{"a CNI's route to another node's Pods", true, false, unix.RTPROT_STATIC, Route{Link: "2"}},
		{"a routing daemon's (BIRD)", true, false, unix.RTPROT_BIRD, Route{Link: "2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, routeOf(2, c.gateway, c.isDefault, c.protocol)); diff != "" {
				t.Errorf("route (-want +got):\n%s", diff)
			}
		})
	}
}

// lanRoutes is a node's routes: Pods (fd00:10:244::/48, 10.244.0.0/16)
// through the CNI's routes to their nodes; the node's own addresses on
// loopback; everything else on the LAN's link, directly or through its
// router - the LAN host chooses which.
func lanRoutes(a netip.Addr) (Route, bool) {
	switch {
	case netip.MustParsePrefix("fd00:10:244::/48").Contains(a), netip.MustParsePrefix("10.244.0.0/16").Contains(a):
		return Route{Link: "2"}, true
	case a == netip.MustParseAddr("2001:db8:1:2::10"):
		return Route{}, false
	}
	return Route{Link: "2", Direct: true}, true
}

// One host on the LAN that marked 65 /64s on-link (one RA, router lifetime
// 0) opens 8 connections from each: it holds 8, and the scraper's
// connection, opened among them, stays open (before: 64, and the
// scraper's was closed).
func TestOneLANHostFromManyPrefixesIsOneClient(t *testing.T) {
	conns := NewConns("test")
	conns.Routes = lanRoutes
	l := &fakeListener{next: make(chan net.Conn, 1)}
	capped := conns.Listen(l)
	open := func(remote string) *fakeConn {
		fc := &fakeConn{remote: remote}
		l.next <- fc
		if _, err := capped.Accept(); err != nil {
			t.Fatal(err)
		}
		return fc
	}
	scrape := open("[fd00:10:244:1::5]:41000")
	probe := open("[2001:db8:1:2::10]:52000") // the kubelet, from the node's own address
	for n := 1; n <= 65; n++ {
		for i := range conns.PerClient {
			open(fmt.Sprintf("[2001:db8:f00:%x::1]:%d", n, 4000+i))
		}
	}
	if scrape.closed || probe.closed {
		t.Errorf("closed: the scraper's %v, the kubelet's %v; want neither", scrape.closed, probe.closed)
	}
	if got, want := conns.Open(), conns.PerClient+2; got != want {
		t.Errorf("%d open, want the LAN host's %d, the scraper's and the kubelet's", got, conns.PerClient)
	}
}

// The guard's review budget is the connection's client's: made-up tokens
// from 100 /64s on the LAN spend one budget, and leave the scraper its own -
// over TLS too, the agent's only guarded mode, where ServeTLS hands
// ConnContext a *tls.Conn around the capped listener's (issue 42).
func TestOneLANHostFromManyPrefixesSpendsOneBudget(t *testing.T) {
	for _, tc := range []struct {
		name string
		conn func(c *Conns, t *testing.T, remote string) context.Context
	}{
		{"plain", (*Conns).conn},
		{"over TLS", (*Conns).connTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newGuarded()
			conns := &Conns{Max: 1 << 20, PerClient: 1 << 20, Routes: lanRoutes}
			reviewed := 0
			for n := range 100 {
				remote := fmt.Sprintf("[2001:db8:f00:%x::1]:4000", n)
				before := x.r.asked
				x.scrapeOn(tc.conn(conns, t, remote), remote, fmt.Sprintf("Bearer made-up-%d", n))
				reviewed += x.r.asked - before
			}
			if reviewed != x.g.ClientBurst {
				t.Errorf("100 /64s on the LAN had %d tokens reviewed at once, want one client's burst, %d", reviewed, x.g.ClientBurst)
			}
			x.r.verdicts["new-scraper-token"] = Allowed
			if got := x.scrapeOn(tc.conn(conns, t, scraper), scraper, "Bearer new-scraper-token"); got != http.StatusOK {
				t.Errorf("the scraper's first scrape, on a new connection: %d, want 200", got)
			}
		})
	}
}

// conn is a new connection's context from remote, as the server makes it
// for a connection c accepted.
func (c *Conns) conn(t *testing.T, remote string) context.Context {
	return c.connVia(t, remote, func(l net.Listener) net.Listener { return l })
}

// connTLS is conn as http.Server.ServeTLS makes it: the capped listener
// wrapped in tls.NewListener.
func (c *Conns) connTLS(t *testing.T, remote string) context.Context {
	return c.connVia(t, remote, func(l net.Listener) net.Listener { return tls.NewListener(l, &tls.Config{}) })
}

func (c *Conns) connVia(t *testing.T, remote string, wrap func(net.Listener) net.Listener) context.Context {
	t.Helper()
	l := &fakeListener{next: make(chan net.Conn, 1)}
	l.next <- &fakeConn{remote: remote}
	nc, err := wrap(c.Listen(l)).Accept()
	if err != nil {
		t.Fatal(err)
	}
	return withConnOf(context.Background(), nc)
}
