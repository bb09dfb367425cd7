package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// Ports (RFC 8415 7.2) and the servers' link-scoped multicast group.
const (
	ClientPort = 546
	ServerPort = 547
)

var allServers = netip.MustParseAddr("ff02::1:2")

// Dial opens the client port on link's link-local address (binding port 546
// needs CAP_NET_BIND_SERVICE) and names the link's servers.
func Dial(link string) (Conn, net.Addr, error) {
	ifi, err := net.InterfaceByName(link)
	if err != nil {
		return nil, nil, err
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, nil, err
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.To4() != nil || !n.IP.IsLinkLocalUnicast() {
			continue
		}
		conn, err := net.ListenUDP("udp6", &net.UDPAddr{IP: n.IP, Port: ClientPort, Zone: link})
		if err != nil {
			return nil, nil, err
		}
		return conn, &net.UDPAddr{IP: allServers.AsSlice(), Port: ServerPort, Zone: link}, nil
	}
	return nil, nil, fmt.Errorf("dhcp6: %s has no link-local address yet", link)
}

// ListenServers opens the servers' port on link's All_DHCP_Relay_Agents_and_
// Servers group, to hear the client messages sent on the link (Watch). The
// socket is bound to the group address, not the wildcard, so that it takes
// nothing sent to a server or relay running on this node, and with
// SO_REUSEADDR, so that one bound to the port may run beside it (each
// socket gets its copy of a multicast datagram).
func ListenServers(link string) (Conn, error) {
	ifi, err := net.InterfaceByName(link)
	if err != nil {
		return nil, err
	}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			if serr == nil {
				mreq := &unix.IPv6Mreq{Interface: uint32(ifi.Index)}
				copy(mreq.Multiaddr[:], allServers.AsSlice())
				serr = unix.SetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, mreq)
			}
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp6", net.JoinHostPort(allServers.String()+"%"+ifi.Name, fmt.Sprint(ServerPort)))
	if err != nil {
		return nil, fmt.Errorf("dhcp6: listening for client messages on %s: %w", link, err)
	}
	return pc.(*net.UDPConn), nil
}
