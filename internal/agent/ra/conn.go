package ra

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// conn is the listener's ICMPv6 socket, opened here rather than by
// ndp.Listen: ndp.Conn does not hand over the socket's ancillary data, and
// the kernel's receive time of each RA (SO_TIMESTAMPNS) and its count of
// drops (SO_RXQ_OVFL) are there. ndp still marshals and parses messages.
type conn struct {
	ic  *net.IPConn
	pc  *ipv6.PacketConn
	raw syscall.RawConn
	ifi *net.Interface
	src netip.Addr
	oob []byte
}

// packet is one message read, with what the kernel said of it.
type packet struct {
	n         int
	from      netip.Addr
	hopLimit  int
	multicast bool
	// dst: where it was sent (pktinfo; invalid: the kernel did not say).
	dst netip.Addr
	// stamp: when the kernel received it (wall clock; zero: not stamped).
	stamp time.Time
	// drops: the socket's drops when it was queued (the kernel's count).
	drops uint32
}

// listen opens the socket on ifi's link-local address (it fails until the
// address has finished DAD: the caller retries).
func listen(ifi *net.Interface) (*conn, error) {
	src, err := linkLocal(ifi)
	if err != nil {
		return nil, err
	}
	// The zone by index, not by name: Go caches names' indexes for up to a
	// minute, and a link re-created under its name was ENODEV to the
	// listener until the cache ran out (every reopen after a re-creation
	// failed for 60-70 s in TestAgentFollowsTheRouter).
	ic, err := net.ListenIP("ip6:ipv6-icmp", &net.IPAddr{IP: src.AsSlice(), Zone: zone(ifi)})
	if err != nil {
		return nil, err
	}
	c := &conn{ic: ic, pc: ipv6.NewPacketConn(ic), ifi: ifi, src: src,
		oob: make([]byte, 256)}
	if err := c.setup(); err != nil {
		ic.Close()
		return nil, err
	}
	return c, nil
}

func (c *conn) setup() error {
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterAdvertisement)
	if err := c.pc.SetICMPFilter(&f); err != nil {
		return fmt.Errorf("ICMP filter: %w", err)
	}
	// The hop limit proves an RA came from the link (RFC 4861 6.1.2); the
	// destination tells a router that unicasts its answers from one that
	// multicasts them (observe's window, answer.go).
	if err := c.pc.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagDst, true); err != nil {
		return fmt.Errorf("control messages: %w", err)
	}
	// Solicitations leave with hop limit 255 too (RFC 4861 6.1.1).
	if err := c.pc.SetMulticastHopLimit(ndp.HopLimit); err != nil {
		return fmt.Errorf("hop limit: %w", err)
	}
	raw, err := c.ic.SyscallConn()
	if err != nil {
		return err
	}
	c.raw = raw
	var serr, cerr error
	if err := raw.Control(func(fd uintptr) {
		serr = errors.Join(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1))
		// The kernel's checksum off, both ways: verifying, it would count
		// a bad checksum in the socket's drops, and one bad RA from any
		// host would pass for a flood (checksum.go). The listener
		// verifies each message itself, and marshals its solicitations
		// with their checksum (solicit). SOL_RAW: Linux refuses the
		// option at IPPROTO_IPV6 on an ICMPv6 socket (RFC 3542 3.1).
		cerr = unix.SetsockoptInt(int(fd), unix.SOL_RAW, unix.IPV6_CHECKSUM, -1)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("receive timestamps: %w", serr)
	}
	if cerr != nil {
		return fmt.Errorf("checksum: %w", cerr)
	}
	return nil
}

// zone is ifi's index as a zone (listen).
func zone(ifi *net.Interface) string { return strconv.Itoa(ifi.Index) }

func linkLocal(ifi *net.Interface) (netip.Addr, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Is6() && ip.IsLinkLocalUnicast() {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("no link-local address on %s", ifi.Name)
}

func (c *conn) Close() error { return c.ic.Close() }

// SetReadDeadline interrupts or bounds read.
func (c *conn) SetReadDeadline(t time.Time) error { return c.ic.SetReadDeadline(t) }

// solicit sends one Router Solicitation to all routers.
func (c *conn) solicit() error {
	rs := &ndp.RouterSolicitation{}
	if len(c.ifi.HardwareAddr) > 0 {
		rs.Options = []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: c.ifi.HardwareAddr}}
	}
	// The checksum is the listener's to compute: the kernel's is off.
	b, err := ndp.MarshalMessageChecksum(rs, c.src.WithZone(""), allRouters)
	if err != nil {
		return err
	}
	cm := &ipv6.ControlMessage{HopLimit: ndp.HopLimit, Src: c.src.AsSlice(), IfIndex: c.ifi.Index}
	_, err = c.pc.WriteTo(b, cm, &net.IPAddr{IP: allRouters.AsSlice(), Zone: zone(c.ifi)})
	return err
}

// read returns the next message. Each time it finds the socket empty it
// calls empty with the time before (now()) and the socket's drops so far:
// every message that arrived before that time has been returned.
func (c *conn) read(buf []byte, now func() time.Time, empty func(time.Time, uint32)) (packet, error) {
	var p packet
	var oobn int
	var from unix.Sockaddr
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		t := now()
		p.n, oobn, _, from, rerr = unix.Recvmsg(int(fd), buf, c.oob, unix.MSG_DONTWAIT)
		if errors.Is(rerr, unix.EAGAIN) {
			empty(t, dropsOf(fd))
			return false // wait until readable (or the deadline)
		}
		return true
	})
	if err != nil {
		return p, err
	}
	if rerr != nil {
		return p, rerr
	}
	sa, ok := from.(*unix.SockaddrInet6)
	if !ok {
		return p, fmt.Errorf("a message from %v, not IPv6", from)
	}
	p.from = netip.AddrFrom16(sa.Addr).WithZone(c.ifi.Name)
	p.multicast = true
	var cm ipv6.ControlMessage
	if cm.Parse(c.oob[:oobn]) == nil {
		p.hopLimit = cm.HopLimit
		p.multicast = cm.Dst == nil || cm.Dst.IsMulticast()
		if d, ok := netip.AddrFromSlice(cm.Dst); ok {
			p.dst = d
		}
	}
	msgs, _ := unix.ParseSocketControlMessage(c.oob[:oobn])
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET {
			continue
		}
		switch {
		case m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})):
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			p.stamp = time.Unix(ts.Unix())
		case m.Header.Type == unix.SO_RXQ_OVFL && len(m.Data) >= 4:
			p.drops = binary.NativeEndian.Uint32(m.Data)
		}
	}
	return p, nil
}

// dropsOf returns the socket's drops so far (SO_MEMINFO), or 0 when the
// kernel does not say.
func dropsOf(fd uintptr) uint32 {
	var mem [unix.SK_MEMINFO_VARS]uint32
	l := uint32(unsafe.Sizeof(mem))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return 0
	}
	return mem[unix.SK_MEMINFO_DROPS]
}
