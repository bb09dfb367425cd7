package dhcp6

import (
	"fmt"
	"net"
	"net/netip"
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
