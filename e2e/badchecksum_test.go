package e2e

import (
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	"github.com/vishvananda/netns"
	"golang.org/x/net/ipv6"

	"github.com/renumber/renumber/internal/digest"
)

// TestBadChecksumsDoNotStallARenumbering: a host on the link - not on the
// router's address, not flooding - sends 3 RAs a second whose ICMPv6
// checksum does not add up. They are invalid messages to the agent, not
// drops from a full queue (which would make it forget every change waiting
// to be corroborated): the router's renumbering lands, as nobody
// contradicts it, and the agent counts no drop.
func TestBadChecksumsDoNotStallARenumbering(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	trustingHome(t, w, nil)
	startAgent(t, w, "node1")
	waitDigest(t, w, "node1", "A", has(prefixA, false, digest.SourceRA))

	rogue, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	pc, idx := uncheckedSocket(t, rogue.NS)
	b, err := ndp.MarshalMessage(&ndp.RouterAdvertisement{RouterLifetime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b[2], b[3] = 0xde, 0xad
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			_, _ = pc.WriteTo(b, &ipv6.ControlMessage{HopLimit: 255, IfIndex: idx},
				&net.IPAddr{IP: net.ParseIP("ff02::1"), Zone: strconv.Itoa(idx)})
		}
	}()
	time.Sleep(2 * time.Second)
	advertise(t, w, prefixB, prefixA)
	invalid := `renumber_agent_ra_invalid_total{link="eth0"}`
	waitDigest(t, w, "node1", "B after the router renumbered (nobody contradicts it)", has(prefixB, false, digest.SourceRA))
	if d := agentMetric(t, w, "node1", `renumber_agent_ra_dropped_total{link="eth0"}`); d != 0 {
		t.Errorf("the agent counted %v drops; want none (no flood)", d)
	}
	if n := agentMetric(t, w, "node1", invalid); n == 0 {
		t.Errorf("no invalid message counted (%s); want the bad checksums", invalid)
	}
}

// uncheckedSocket opens a raw ICMPv6 socket on eth0 in the namespace ns whose
// checksum the kernel leaves as written (IPV6_CHECKSUM -1 at SOL_RAW), and
// returns it with eth0's index. The thread goes back to its namespace before
// it is released: a thread that dies would take with it the world's
// processes it started (Pdeathsig), the API server among them.
func uncheckedSocket(t *testing.T, ns string) (*ipv6.PacketConn, int) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(ns)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	ifi, err := net.InterfaceByName("eth0")
	var ic *net.IPConn
	if err == nil {
		ic, err = net.ListenIP("ip6:ipv6-icmp", &net.IPAddr{IP: net.IPv6unspecified})
	}
	if netns.Set(orig) != nil {
		panic("e2e: cannot leave namespace " + ns) // the thread stays locked, out of use
	}
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ic.Close() })
	pc := ipv6.NewPacketConn(ic)
	if err := pc.SetChecksum(false, -1); err != nil {
		t.Fatal(err)
	}
	return pc, ifi.Index
}
