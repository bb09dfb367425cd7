package metrics

import (
	"fmt"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeConn is a connection from remote that records being closed.
type fakeConn struct {
	net.Conn
	remote string
	closed bool
}

type fakeAddr string

func (a fakeAddr) Network() string       { return "tcp" }
func (a fakeAddr) String() string        { return string(a) }
func (c *fakeConn) RemoteAddr() net.Addr { return fakeAddr(c.remote) }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

// fakeListener hands out the connections it is given.
type fakeListener struct {
	net.Listener
	next chan net.Conn
}

func (l *fakeListener) Accept() (net.Conn, error) { return <-l.next, nil }

// accepted opens a connection from each of remotes through a Conns of max
// and perClient, and returns them in order.
func accepted(t *testing.T, c *Conns, remotes ...string) []*fakeConn {
	l := &fakeListener{next: make(chan net.Conn, 1)}
	capped := c.Listen(l)
	var out []*fakeConn
	for _, r := range remotes {
		fc := &fakeConn{remote: r}
		l.next <- fc
		if _, err := capped.Accept(); err != nil {
			t.Fatal(err)
		}
		out = append(out, fc)
	}
	return out
}

// closed names the connections closed, by index.
func closed(conns []*fakeConn) []int {
	var out []int
	for i, c := range conns {
		if c.closed {
			out = append(out, i)
		}
	}
	return out
}

func TestConnectionsBeyondTheCapsCloseTheOldestOfWhoeverHoldsMost(t *testing.T) {
	for _, c := range []struct {
		name    string
		remotes []string
		want    []int
	}{
		{"within the caps, nothing closes",
			[]string{"192.168.1.5:1", "192.168.1.5:2", "[fd00:10:244::5]:1"}, nil},
		{"one client beyond its cap closes its own oldest",
			[]string{"192.168.1.5:1", "192.168.1.5:2", "[fd00:10:244::5]:1", "192.168.1.77:3", "192.168.1.5:4"}, []int{0}},
		{"a /64 is one client",
			[]string{"[2001:db8:1:2::1]:1", "[2001:db8:1:2::2]:1", "[2001:db8:1:2::3]:1", "[2001:db8:1:2::4]:1"}, []int{0}},
		{"beyond the total cap, the client holding most loses its oldest",
			[]string{"[fd00:10:244::5]:1", "10.0.1.1:1", "10.0.1.2:1", "10.0.2.1:1", "10.0.3.1:1"}, []int{1}},
		{"when all hold as many, the oldest goes",
			[]string{"[fd00:10:244::5]:1", "10.0.1.1:1", "10.0.2.1:1", "10.0.3.1:1", "10.0.4.1:1"}, []int{0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			conns := &Conns{Max: 4, PerClient: 3}
			got := accepted(t, conns, c.remotes...)
			if diff := cmp.Diff(c.want, closed(got)); diff != "" {
				t.Errorf("closed (-want +got):\n%s", diff)
			}
			if conns.Open() > conns.Max {
				t.Errorf("%d open, cap %d", conns.Open(), conns.Max)
			}
		})
	}
}

// An attacker who opens connections from every address of the LAN's /24 and
// /64 without end closes its own: the scraper's connection, opened among
// them, stays open.
func TestAFloodOfConnectionsLeavesTheScraperItsConnection(t *testing.T) {
	conns := NewConns("test")
	l := &fakeListener{next: make(chan net.Conn, 1)}
	capped := conns.Listen(l)
	open := func(remote string) *fakeConn {
		fc := &fakeConn{remote: remote}
		l.next <- fc
		x, err := capped.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_ = x
		return fc
	}
	var scrape *fakeConn
	for i := range 5000 {
		if i == 2500 {
			scrape = open("[fd00:10:244:1::5]:41000")
		}
		if i%2 == 0 {
			open(fmt.Sprintf("192.168.1.%d:%d", 1+i%254, i))
		} else {
			open(fmt.Sprintf("[2001:db8:1:2::%x]:%d", i, i))
		}
		if conns.Open() > conns.Max {
			t.Fatalf("%d open, cap %d", conns.Open(), conns.Max)
		}
	}
	if scrape.closed {
		t.Error("the scraper's connection was closed to make room for the flood")
	}
	if got := conns.Open(); got != 2*conns.PerClient+1 {
		t.Errorf("%d open, want the flood's two subnets' %d and the scraper's", got, 2*conns.PerClient)
	}
}

// Closing a connection frees its place.
func TestAClosedConnectionFreesItsPlace(t *testing.T) {
	conns := &Conns{Max: 2, PerClient: 2}
	l := &fakeListener{next: make(chan net.Conn, 1)}
	capped := conns.Listen(l)
	l.next <- &fakeConn{remote: "192.168.1.5:1"}
	x, _ := capped.Accept()
	_ = x.Close()
	_ = x.Close() // twice is once
	if conns.Open() != 0 {
		t.Errorf("%d open after close, want 0", conns.Open())
	}
	got := accepted(t, conns, "192.168.1.5:2", "192.168.1.5:3")
	if diff := cmp.Diff([]int(nil), closed(got)); diff != "" {
		t.Errorf("closed (-want +got):\n%s", diff)
	}
}
