package dhcp6

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The packet socket counts what its queue dropped: a burst of 2,000
// packets to ff02::1:2 port 547, none read while it lands, overflows the
// queue, and Dropped says so once a packet is read (and only what was
// dropped since it was last asked). On a veth pair in a network namespace
// the test made; it needs root.
func TestThePacketSocketCountsItsDrops(t *testing.T) {
	v := newVeth(t)
	var first, second int
	v.in(t, func() error {
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
	v := newVeth(t)
	var conn Conn
	v.in(t, func() (err error) {
		conn, err = ListenServers("rx")
		return err
	})
	link, groups := v.ip(t, "-d", "link", "show", "rx"), v.ip(t, "-6", "maddr", "show", "dev", "rx")
	if !strings.Contains(link, " allmulti 1 ") {
		t.Errorf("listening, the link is not in all-multicast mode: %s", link)
	}
	for _, g := range joinedGroups {
		if !strings.Contains(groups, " "+g.String()+"\n") {
			t.Errorf("listening, %s not joined: %s", g, groups)
		}
	}
	conn.Close()
	link, groups = v.ip(t, "-d", "link", "show", "rx"), v.ip(t, "-6", "maddr", "show", "dev", "rx")
	if !strings.Contains(link, " allmulti 0 ") {
		t.Errorf("closed, the link stays in all-multicast mode: %s", link)
	}
	if strings.Contains(groups, " ff02::1:2\n") {
		t.Errorf("closed, ff02::1:2 stays joined: %s", groups)
	}
}

// veth is a veth pair rx-tx in a network namespace the test made (and
// deletes); it needs root.
type veth struct {
	name string
	ns   netns.NsHandle
}

func newVeth(t *testing.T) *veth {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace)")
	}
	v := &veth{name: fmt.Sprintf("pkt-%d", os.Getpid())}
	if out, err := exec.Command("ip", "netns", "add", v.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", v.name).Run() })
	v.ip(t, "link", "add", "rx", "type", "veth", "peer", "name", "tx")
	v.ip(t, "link", "set", "dev", "rx", "up")
	v.ip(t, "link", "set", "dev", "tx", "up")
	var err error
	if v.ns, err = netns.GetFromName(v.name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.ns.Close() })
	return v
}

// ip runs ip(8) in the namespace and returns its output.
func (v *veth) ip(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", v.name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
	return string(out)
}

// in runs f on a thread in the namespace (sockets stay in the namespace
// they were made in; the thread dies with its goroutine).
func (v *veth) in(t *testing.T, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(v.ns); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
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
