package world

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"

	"github.com/vishvananda/netns"
	"golang.org/x/net/icmp"
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
func (r *Router) SendRA(b []byte) error {
	var conn *icmp.PacketConn
	var ifi *net.Interface
	err := inNS(r.NS, func() error {
		var err error
		if ifi, err = net.InterfaceByName("eth0"); err != nil {
			return err
		}
		conn, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	p := conn.IPv6PacketConn()
	if err := p.SetMulticastHopLimit(255); err != nil {
		return err
	}
	if err := p.SetMulticastInterface(ifi); err != nil {
		return err
	}
	// The zone by index: its name would be looked up in this thread's namespace.
	_, err = p.WriteTo(b, nil, &net.IPAddr{IP: net.ParseIP("ff02::1"), Zone: strconv.Itoa(ifi.Index)})
	return err
}

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
