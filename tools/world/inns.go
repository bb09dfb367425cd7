package world

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"

	"github.com/vishvananda/netns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// inNS runs f with the calling thread inside the named network namespace:
// sockets f opens stay there after it returns.
func inNS(ns string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := netns.GetFromName(ns)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return err
	}
	fErr := f()
	if err := netns.Set(orig); err != nil {
		panic(fmt.Sprintf("world: cannot leave namespace %s: %v", ns, err)) // the thread is unusable
	}
	return fErr
}

// SendRA sends b, an ICMPv6 message as raw bytes (any type or code), from the
// router's eth0 to all nodes (ff02::1) with hop limit 255: the packets radvd
// would never send. The kernel fills in the checksum.
func (r *Router) SendRA(b []byte) error { return r.SendRAFrom(netip.Addr{}, b) }

// SendRAFrom is SendRA from the source address src, an address on the
// router's eth0 (the zero Addr: the one the kernel picks).
func (r *Router) SendRAFrom(src netip.Addr, b []byte) error {
	s, err := r.Sender()
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Send(src, b)
}

// RASender sends raw RAs from a router's eth0 over one socket (a flood).
type RASender struct {
	conn *icmp.PacketConn
	ifi  *net.Interface
}

// Sender opens a socket on the router's eth0 for SendRAFrom's packets.
func (r *Router) Sender() (*RASender, error) {
	s := &RASender{}
	err := inNS(r.NS, func() error {
		var err error
		if s.ifi, err = net.InterfaceByName("eth0"); err != nil {
			return err
		}
		s.conn, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	})
	if err != nil {
		return nil, err
	}
	p := s.conn.IPv6PacketConn()
	if err := p.SetMulticastHopLimit(255); err != nil {
		s.conn.Close()
		return nil, err
	}
	if err := p.SetMulticastInterface(s.ifi); err != nil {
		s.conn.Close()
		return nil, err
	}
	return s, nil
}

// Send sends b to all nodes from src (zero: the kernel's choice).
func (s *RASender) Send(src netip.Addr, b []byte) error {
	var cm *ipv6.ControlMessage
	if src.IsValid() {
		cm = &ipv6.ControlMessage{Src: src.AsSlice(), IfIndex: s.ifi.Index, HopLimit: 255}
	}
	// The zone by index: its name would be looked up in this thread's namespace.
	_, err := s.conn.IPv6PacketConn().WriteTo(b, cm, &net.IPAddr{IP: net.ParseIP("ff02::1"), Zone: strconv.Itoa(s.ifi.Index)})
	return err
}

// Close closes the socket.
func (s *RASender) Close() error { return s.conn.Close() }

// Get fetches url (http, an address reachable inside the node, such as the
// agent's metrics on [::1]:9470) from inside the node's namespace.
func (nd *Node) Get(url string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	var conn net.Conn
	if err := inNS(nd.NS, func() error { conn, err = net.Dial("tcp", req.URL.Host); return err }); err != nil {
		return nil, err
	}
	defer conn.Close()
	req.Close = true
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s in %s: %s", url, nd.NS, resp.Status)
	}
	return io.ReadAll(resp.Body)
}
