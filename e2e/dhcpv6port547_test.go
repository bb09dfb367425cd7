package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/renumber/renumber/tools/world"
)

// TestDHCPv6PDAForgedReleaseIsReportedBesideAServerHoldingPort547: as
// TestDHCPv6PDAForgedReleaseIsReported, but on every node something - a
// DHCPv6 server or relay of the node's own, as far as the agent can tell -
// holds [::]:547 without SO_REUSEADDR from before the agents start, so no
// UDP socket of the agent's can bind the servers' port on the node. The
// client's node still hears the forged Release (it reads the link below
// UDP) and reports it. (Before, the agent warned that it could not listen,
// retried each minute, and the Release went unreported.)
func TestDHCPv6PDAForgedReleaseIsReportedBesideAServerHoldingPort547(t *testing.T) {
	const nodes = 2
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 60 * time.Second, Preferred: 30 * time.Second}
	w := newWorld(t, nodes)
	for _, n := range []string{"node1", "node2"} {
		holdPort547(t, w, n)
	}
	pdClientWorldIn(t, w, nodes, first)
	forgedReleaseIsReported(t, w, first)
}

// holdPort547 binds [::]:547 in node's namespace for the rest of the test,
// without SO_REUSEADDR (as a server or relay may), and checks that a socket
// joined to ff02::1:2 with SO_REUSEADDR - the agent's listener before -
// can no longer bind the port there.
func holdPort547(t *testing.T, w *world.World, node string) {
	t.Helper()
	nd, err := w.Net.Node(node)
	if err != nil {
		t.Fatal(err)
	}
	err = nd.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet6{Port: 547}); err != nil {
			unix.Close(fd)
			return err
		}
		holder := os.NewFile(uintptr(fd), "port 547")
		t.Cleanup(func() { holder.Close() })
		beside, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(beside)
		if err := unix.SetsockoptInt(beside, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return err
		}
		ifi, err := net.InterfaceByName(nd.Link)
		if err != nil {
			return err
		}
		group := unix.SockaddrInet6{Port: 547, Addr: netip.MustParseAddr("ff02::1:2").As16(), ZoneId: uint32(ifi.Index)}
		if err := unix.Bind(beside, &group); !errors.Is(err, unix.EADDRINUSE) {
			return fmt.Errorf("a socket with SO_REUSEADDR binding the servers' group port: %v, want EADDRINUSE", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: holding port 547: %v", node, err)
	}
}
