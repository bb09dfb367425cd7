package dhcp6

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
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
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace)")
	}
	name := fmt.Sprintf("pktdrops-%d", os.Getpid())
	for _, args := range [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "add", "rx", "type", "veth", "peer", "name", "tx"},
		{"-n", name, "link", "set", "dev", "rx", "up"},
		{"-n", name, "link", "set", "dev", "tx", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		if args[0] == "netns" {
			t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
		}
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	type result struct {
		first, second int
		err           error
	}
	done := make(chan result, 1)
	go func() { // the thread dies with the goroutine, in the namespace
		runtime.LockOSThread()
		done <- func() result {
			if err := netns.Set(ns); err != nil {
				return result{err: err}
			}
			conn, err := ListenServers("rx")
			if err != nil {
				return result{err: err}
			}
			defer conn.Close()
			if err := speak("tx", 2000); err != nil {
				return result{err: err}
			}
			if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				return result{err: err}
			}
			if _, _, err := conn.ReadFrom(make([]byte, 40+0xffff)); err != nil {
				return result{err: err}
			}
			c := conn.(dropCounter)
			first, err := c.Dropped()
			if err != nil {
				return result{err: err}
			}
			second, err := c.Dropped()
			return result{first, second, err}
		}()
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.first == 0 || r.first >= 2000 {
		t.Errorf("dropped %d of 2,000 unread, want some but not all", r.first)
	}
	t.Logf("dropped %d of 2,000 unread", r.first)
	if r.second != 0 {
		t.Errorf("asked again at once: %d dropped, want 0 (counted since last asked)", r.second)
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
