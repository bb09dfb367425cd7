package dhcp6

import (
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/renumber/renumber/internal/agent/vethtest"
)

// The packet socket counts what its queue dropped: a burst of 2,000
// packets to ff02::1:2 port 547, none read while it lands, overflows the
// queue, and Dropped says so once a packet is read (and only what was
// dropped since it was last asked). On a veth pair in a network namespace
// the test made; it needs root.
func TestThePacketSocketCountsItsDrops(t *testing.T) {
	v := vethtest.New(t, "pkt")
	var first, second int
	v.Do(t, func() error {
		conn, err := ListenServers("rx")
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := speak("tx", 2000); err != nil {
			return err
		}
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return err
		}
		if _, _, err := conn.ReadFrom(make([]byte, 40+0xffff)); err != nil {
			return err
		}
		c := conn.(dropCounter)
		if first, err = c.Dropped(); err != nil {
			return err
		}
		second, err = c.Dropped()
		return err
	})
	t.Logf("dropped %d of 2,000 unread", first)
	if first == 0 || first >= 2000 {
		t.Errorf("dropped %d of 2,000 unread, want some but not all", first)
	}
	if second != 0 {
		t.Errorf("asked again at once: %d dropped, want 0 (counted since last asked)", second)
	}
}

// While it listens, the link accepts every group's frames (all-multicast:
// a Release to any group a server joined is heard wherever the link brings
// it) and has joined the servers' and all routers' groups (a snooping
// switch forwards those); closed, neither stays.
func TestTheListenerTakesEveryGroupWhileOpen(t *testing.T) {
	v := vethtest.New(t, "pkt")
	var conn Conn
	v.Do(t, func() (err error) {
		conn, err = ListenServers("rx")
		return err
	})
	link, groups := v.IP(t, "-d", "link", "show", "rx"), v.IP(t, "-6", "maddr", "show", "dev", "rx")
	if !strings.Contains(link, " allmulti 1 ") {
		t.Errorf("listening, the link is not in all-multicast mode: %s", link)
	}
	for _, g := range joinedGroups {
		if !strings.Contains(groups, " "+g.String()+"\n") {
			t.Errorf("listening, %s not joined: %s", g, groups)
		}
	}
	conn.Close()
	link, groups = v.IP(t, "-d", "link", "show", "rx"), v.IP(t, "-6", "maddr", "show", "dev", "rx")
	if !strings.Contains(link, " allmulti 0 ") {
		t.Errorf("closed, the link stays in all-multicast mode: %s", link)
	}
	if strings.Contains(groups, " ff02::1:2\n") {
		t.Errorf("closed, ff02::1:2 stays joined: %s", groups)
	}
}

// speak sends n packets from fe80::bad to ff02::1:2 port 547 on link, each
// carrying 1,400 bytes, in frames to the group's link-layer address.
func speak(link string, n int) error {
	ifi, err := net.InterfaceByName(link)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	pkt := ipv6Packet(allServers, nil, ServerPort, make([]byte, 1400), 0)
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: ifi.Index, Halen: 6, Addr: [8]byte{0x33, 0x33, 0, 1, 0, 2}}
	for range n {
		if err := unix.Sendto(fd, pkt, 0, to); err != nil {
			return err
		}
	}
	return nil
}
