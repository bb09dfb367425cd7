package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestAFloodAheadOfTheRoutersAnswerLetsNoSpooferIn: the agent's window is
// 250 ms past the router's answer bound, and the node is loaded (the agent's
// process gets 5% of a core: a cgroup CPU quota). A host on the LAN holds the
// router's link-local address and 15 more. In 4 rounds it floods - a burst of
// 2,000 RAs from all 16 sources (junk prefixes; from the router's address
// radvd's own offer, which changes nothing) - then for 6 s offers its own
// prefix from the router's address, each time before ~940 more junk RAs from
// its other addresses: the router's answer to the agent's solicitation waits
// behind the junk in the node's socket, or is dropped with the queue full.
// Settled by its clock, the agent believed the spoofer (its digest held
// 2001:db8:bad::/64 preferred, A deprecated, in the first run against it).
// Settled by what arrived - kernel receive times, read up to the window's
// end, the kernel's drops reported - it never reports the spoofer's prefix,
// and the flood is reported (drops or the conflict). Then the router
// renumbers, and it lands.
func TestAFloodAheadOfTheRoutersAnswerLetsNoSpooferIn(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	trusted := trustingHome(t, w, nil)
	agent := startAgent(t, w, "node1", "--corroboration", "250ms", "--conflict-hold", "15s")
	waitDigest(t, w, "node1", "A", has(prefixA, false, digest.SourceRA))
	// The node is loaded: the agent gets 5 ms of CPU in every 100 ms.
	lift := throttle(t, agent.Process.Pid, 5*time.Millisecond)

	impostor, ll, err := w.Net.Impostor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ll != trusted {
		t.Fatalf("the impostor holds %s, the router %s", ll, trusted)
	}
	sources := []netip.Addr{trusted}
	for i := 1; len(sources) < 16; i++ {
		a := netip.MustParseAddr(fmt.Sprintf("fe80::bad:%x", i))
		if err := impostor.AddLinkLocal(ctx, a); err != nil {
			t.Fatal(err)
		}
		sources = append(sources, a)
	}
	sender, err := impostor.Sender()
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()

	same := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixA, 600*time.Second, 300*time.Second)})
	spoof := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixX, 600*time.Second, 300*time.Second)})
	believed := watchAnnotation(t, w, "node1", func(v string) bool {
		return strings.Contains(v, prefixX.Addr().String()) || !strings.Contains(v, prefixA.String()+" p ra")
	})
	// Marshalled beforehand: the flood outruns the agent's reading. The
	// burst before the offer comes from all 16 sources (from the router's
	// address, radvd's own offer); the junk after it from the 15 others, so
	// nothing but the router contradicts the offer.
	burst := make([][]byte, 2000)
	for i := range burst {
		burst[i] = same
		if i%len(sources) != 0 {
			burst[i] = copyOfRadvd(t, []*ndp.PrefixInformation{junkPIO(i, time.Hour)})
		}
	}
	send := func(i int, b []byte) { _ = sender.Send(sources[i], b) } // a send refused is no matter
	sent, bad := 0, ""
	for round := 0; round < 4 && bad == ""; round++ {
		for i, b := range burst {
			send(i%len(sources), b)
		}
		sent += len(burst)
		for end := time.Now().Add(6 * time.Second); time.Now().Before(end); {
			if err := sender.Send(trusted, spoof); err != nil {
				t.Fatalf("spoofing: %v", err)
			}
			for i, b := range burst[:1000] {
				if i%len(sources) != 0 {
					send(i%len(sources), b)
					sent++
				}
			}
		}
		bad = believed()
	}
	// Past the last window, what the agent settled on.
	time.Sleep(2 * time.Second)
	bad = believed()
	if bad != "" {
		t.Fatalf("the agent believed the spoofer: %s", bad)
	}
	dropped := agentMetric(t, w, "node1", `renumber_agent_ra_dropped_total{link="eth0"}`)
	contradictions := agentMetric(t, w, "node1", `renumber_agent_router_contradictions_total{link="eth0"}`)
	t.Logf("%d RAs sent; the node's kernel dropped %v; %v contradictions counted", sent, dropped, contradictions)
	if dropped == 0 && contradictions == 0 {
		t.Errorf("the flood was not reported: no drops, no contradictions")
	}

	// The flood and the load are over; the router renumbers: it lands.
	lift()
	advertise(t, w, prefixB, prefixA)
	waitDigest(t, w, "node1", "B", has(prefixB, false, digest.SourceRA))
}

// throttle puts process pid in a cgroup (v1 cpu hierarchy) of its own with
// quota of CPU time per 100 ms; the function it returns (also run when the
// test ends) lifts it.
func throttle(t *testing.T, pid int, quota time.Duration) func() {
	t.Helper()
	root := "/sys/fs/cgroup/cpu"
	dir := filepath.Join(root, fmt.Sprintf("renumber-e2e-%d-%d", os.Getpid(), pid))
	write := func(file, v string) error { return os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644) }
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no cgroup for the load: %v", err)
	}
	if err := write("cpu.cfs_period_us", "100000"); err != nil {
		t.Fatal(err)
	}
	if err := write("cpu.cfs_quota_us", strconv.FormatInt(quota.Microseconds(), 10)); err != nil {
		t.Fatal(err)
	}
	if err := write("cgroup.procs", strconv.Itoa(pid)); err != nil {
		t.Fatal(err)
	}
	lifted := false
	lift := func() {
		if lifted {
			return
		}
		lifted = true
		_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		_ = os.Remove(dir)
	}
	t.Cleanup(lift)
	return lift
}

// watchAnnotation samples node's digest every 50 ms until the test ends; the
// function it returns gives the first digest bad said was bad ("" if none).
func watchAnnotation(t *testing.T, w *world.World, node string, bad func(string) bool) func() string {
	t.Helper()
	return firstSeen(t, 50*time.Millisecond, func(ctx context.Context) string {
		if n, err := w.API.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
			if v := n.Annotations[digest.Annotation]; bad(v) {
				return v
			}
		}
		return ""
	})
}
