package dhcp6

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Ports (RFC 8415 7.2) and the servers' link-scoped multicast group.
const (
	ClientPort = 546
	ServerPort = 547
)

var allServers = netip.MustParseAddr("ff02::1:2")

// siteServers is All_DHCP_Servers (ff05::1:3): relays send there, and ISC
// dhcpd joins it on its links and acts on a client message sent there as
// on one sent to ff02::1:2 - so a forger on the link may use it too.
var siteServers = netip.MustParseAddr("ff05::1:3")

// serverGroups are the DHCPv6 servers' groups.
var serverGroups = [...]netip.Addr{allServers, siteServers}

// joinedGroups are the groups the Watch joins on its link: the servers',
// and all routers' (ff02::2, ff05::2), which a forwarding host - where a
// server often runs - joins, and a server bound to [::]:547 is handed.
// Joined, a snooping switch forwards them to the node too; the packet
// socket takes every other group the link brings (PACKET_MR_ALLMULTI).
var joinedGroups = [...]netip.Addr{allServers, siteServers, netip.MustParseAddr("ff02::2"), netip.MustParseAddr("ff05::2")}

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

// ListenServers opens a packet socket on link (it needs CAP_NET_RAW, which
// the agent holds for its ICMPv6 socket) that reads the IPv6 packets sent
// to port 547 of any group (All_DHCP_Relay_Agents_and_Servers and
// All_DHCP_Servers, and any other a server's wildcard socket is handed),
// to hear the client messages sent on the link (Watch.HeardPacket). It takes a copy of
// each and binds no port: it hears beside a DHCPv6 server or relay on the
// node whether or not that one set SO_REUSEADDR (a UDP socket on port 547
// could not bind beside one that did not, and heard nothing), and takes
// nothing from it.
// The kernel drops every other packet (serversFilter) before it is queued,
// and the queue is the socket's receive buffer: a flood costs the drops,
// not memory. A UDP socket, bound to no port so it receives nothing, joins
// the joinedGroups on the link, and its MLD report makes a snooping switch
// forward them to the node; the packet socket puts the link in all-multicast
// mode while it is open, so the NIC accepts every group's frames the link
// brings (a Release to any group a server joined is acted on).
func ListenServers(link string) (Conn, error) {
	ifi, err := net.InterfaceByName(link)
	if err != nil {
		return nil, err
	}
	group, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, fmt.Errorf("dhcp6: joining the servers' group on %s: %w", link, err)
	}
	for _, g := range joinedGroups {
		mreq := &unix.IPv6Mreq{Interface: uint32(ifi.Index), Multiaddr: g.As16()}
		if err := unix.SetsockoptIPv6Mreq(group, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, mreq); err != nil {
			unix.Close(group)
			return nil, fmt.Errorf("dhcp6: joining %s on %s: %w", g, link, err)
		}
	}
	f, err := packetSocket(ifi.Index)
	if err != nil {
		unix.Close(group)
		return nil, fmt.Errorf("dhcp6: listening for client messages on %s: %w", link, err)
	}
	return &packetConn{File: f, group: os.NewFile(uintptr(group), "group"), link: link, index: ifi.Index}, nil
}

// packetSocket opens an AF_PACKET socket of type SOCK_DGRAM (the network
// layer, whatever the link layer: Ethernet, a VLAN's, PPP's) for the IPv6
// packets serversFilter keeps on the interface of index ifindex, in
// all-multicast mode. It is
// opened for no protocol and bound to IPv6 only once the filter is on, so
// that nothing unfiltered is queued meanwhile.
func packetSocket(ifindex int) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(serversFilter())
	if err == nil {
		prog := make([]unix.SockFilter, len(raw))
		for i, r := range raw {
			prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
		}
		err = unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
	}
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: ifindex})
	}
	if err == nil { // undone when the socket closes
		err = unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_ALLMULTI})
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "packet"), nil // non-blocking: read through the poller, deadlines work
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// packetConn reads the packets of a packet socket; it sends nothing.
type packetConn struct {
	*os.File
	group *os.File // the socket holding the group membership
	link  string
	index int // the link's index when bound
}

// ReadFrom reads a packet. The kernel reports the link going down once
// (ENETDOWN) and queues again when it comes up: that is read past, unless
// the link was replaced (deleted, or made anew under another index), which
// the socket never hears again - then the error goes to the caller, which
// opens the listener anew.
func (c *packetConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, err := c.Read(b)
		if !errors.Is(err, unix.ENETDOWN) {
			return n, nil, err
		}
		if ifi, ierr := net.InterfaceByName(c.link); ierr != nil || ifi.Index != c.index {
			return n, nil, err
		}
	}
}

// Dropped is how many packets the filter kept that the socket's queue
// dropped unread since the last call (PACKET_STATISTICS, which the kernel
// resets on each read): a flood past what the agent reads.
func (c *packetConn) Dropped() (int, error) {
	raw, err := c.File.SyscallConn()
	if err != nil {
		return 0, err
	}
	var st *unix.TpacketStats
	var serr error
	if err := raw.Control(func(fd uintptr) {
		st, serr = unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return int(st.Drops), nil
}

func (c *packetConn) WriteTo([]byte, net.Addr) (int, error) {
	return 0, errors.New("dhcp6: the servers' listener sends nothing")
}

func (c *packetConn) Close() error {
	return errors.Join(c.File.Close(), c.group.Close()) // twice is harmless: no descriptor closed twice
}
