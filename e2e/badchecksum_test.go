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
	// A raw ICMPv6 socket in the rogue's namespace whose checksum the kernel
	// leaves as given (IPV6_CHECKSUM -1 at SOL_RAW).
	type res struct {
		pc  *ipv6.PacketConn
		idx int
		err error
	}
	got := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // the thread dies in the namespace with the goroutine
		ns, err := netns.GetFromName(rogue.NS)
		if err == nil {
			err = netns.Set(ns)
		}
		if err != nil {
			got <- res{err: err}
			return
		}
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			got <- res{err: err}
			return
		}
		ic, err := net.ListenIP("ip6:ipv6-icmp", &net.IPAddr{IP: net.IPv6unspecified})
		if err != nil {
			got <- res{err: err}
			return
		}
		pc := ipv6.NewPacketConn(ic)
		err = pc.SetChecksum(false, -1)
		got <- res{pc, ifi.Index, err}
	}()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.pc.Close()
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
			_, _ = r.pc.WriteTo(b, &ipv6.ControlMessage{HopLimit: 255, IfIndex: r.idx},
				&net.IPAddr{IP: net.ParseIP("ff02::1"), Zone: strconv.Itoa(r.idx)})
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
