package world

import (
	"net"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// DHCPv6Speaker is a socket on a router's eth0 at the DHCPv6 servers' port,
// joined to All_DHCP_Relay_Agents_and_Servers (ff02::1:2): what any host on
// a home link can open to hear every client's multicast Solicit, Request,
// Renew and Rebind (the server's DUID and the transaction ID with them) and
// to answer them itself. Run no dhcpd in the same router.
type DHCPv6Speaker struct {
	conn net.PacketConn
	ifi  *net.Interface
	ns   string // the router's namespace
}

// DHCPv6Speaker opens the speaker on r's eth0.
func (r *Router) DHCPv6Speaker() (*DHCPv6Speaker, error) {
	s := &DHCPv6Speaker{ns: r.NS}
	err := inNS(r.NS, func() error {
		var err error
		if s.ifi, err = net.InterfaceByName("eth0"); err != nil {
			return err
		}
		s.conn, err = net.ListenPacket("udp6", "[::]:547")
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := ipv6.NewPacketConn(s.conn).JoinGroup(s.ifi, &net.UDPAddr{IP: net.ParseIP("ff02::1:2")}); err != nil {
		s.conn.Close()
		return nil, err
	}
	return s, nil
}

// Read waits until deadline for a client's message; it returns the message
// and its sender.
func (s *DHCPv6Speaker) Read(deadline time.Time) ([]byte, net.Addr, error) {
	if err := s.conn.SetReadDeadline(deadline); err != nil {
		return nil, nil, err
	}
	buf := make([]byte, 1500)
	n, from, err := s.conn.ReadFrom(buf)
	return buf[:n], from, err
}

// Answer sends b to the client that sent from (its port 546 on the link).
func (s *DHCPv6Speaker) Answer(b []byte, from net.Addr) error {
	u, ok := from.(*net.UDPAddr)
	if !ok {
		return net.InvalidAddrError(from.String())
	}
	// The zone by index: its name would be looked up in this thread's namespace.
	_, err := s.conn.WriteTo(b, &net.UDPAddr{IP: u.IP, Port: 546, Zone: strconv.Itoa(s.ifi.Index)})
	return err
}

// Close closes the socket.
func (s *DHCPv6Speaker) Close() error { return s.conn.Close() }

// SpeakToServers sends b to the link's servers (ff02::1:2, port 547), as a
// client sends its messages: what any host can do in a client's name.
func (s *DHCPv6Speaker) SpeakToServers(b []byte) error {
	_, err := s.conn.WriteTo(b, &net.UDPAddr{IP: net.ParseIP("ff02::1:2"), Port: 547, Zone: strconv.Itoa(s.ifi.Index)})
	return err
}

// SpeakToServersBehindHopByHop is SpeakToServers with a hop-by-hop
// extension header (a Router Alert option) before UDP: a server's kernel
// walks it and hands the server the datagram all the same.
func (s *DHCPv6Speaker) SpeakToServersBehindHopByHop(b []byte) error {
	rc, err := s.conn.(*net.UDPConn).SyscallConn()
	if err != nil {
		return err
	}
	set := func(hbh string) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_IPV6, unix.IPV6_HOPOPTS, hbh)
		}); err != nil {
			return err
		}
		return serr
	}
	// next header (the kernel's), length 0 (8 bytes), Router Alert (MLD), PadN.
	if err := set(string([]byte{0, 0, 5, 2, 0, 0, 1, 0})); err != nil {
		return err
	}
	defer set("")
	return s.SpeakToServers(b)
}

// SpeakToServerAt sends b to a server's own address a (port 547), unicast,
// as a relay sends its Relay-Forward: no listener on ff02::1:2 hears it.
func (s *DHCPv6Speaker) SpeakToServerAt(b []byte, a netip.Addr) error {
	_, err := s.conn.WriteTo(b, &net.UDPAddr{IP: a.AsSlice(), Port: 547, Zone: strconv.Itoa(s.ifi.Index)})
	return err
}

// SpeakPackets sends each of pkts, a whole IPv6 packet (header, any
// extension headers or fragment, UDP) built by the caller, on the speaker's
// link in a frame to the destination's multicast link-layer address (or
// to all nodes' for a unicast destination): what any host can put on the
// wire, past what its own kernel's stack would build. For the forged
// packets of e2e/dhcpv6forgedpackets_test.go.
func (s *DHCPv6Speaker) SpeakPackets(pkts ...[]byte) error {
	var sendErr error
	err := inNS(s.ns, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, p := range pkts {
			if len(p) < 40 {
				return net.InvalidAddrError("short packet")
			}
			mac := []byte{0x33, 0x33, 0, 0, 0, 1}
			if p[24] == 0xff {
				copy(mac[2:], p[36:40])
			}
			to := &unix.SockaddrLinklayer{Protocol: 0xdd86, Ifindex: s.ifi.Index, Halen: 6}
			copy(to.Addr[:], mac)
			if err := unix.Sendto(fd, p, 0, to); err != nil {
				sendErr = err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return sendErr
}
