package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// cpuTicks is the user+system clock ticks process pid has used.
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}

// TestDHCPv6PDASilentConfirmerOfTwoLeavesTheWriterIdle: two eligible nodes
// (the stall the docs accept, reported). The confirmer's Node is taken and
// its digest says nothing offered. Past --dhcpv6-confirm-within the rotation
// has nobody else to name; the pair and the disagreement's start stay, and
// the writer looks again a bound later - it does not pass again at once, for
// as long as they disagree (it did: 1.2 cores). Measured: the writer's CPU
// ticks over 20 s at rest and 20 s into the stall.
func TestDHCPv6PDASilentConfirmerOfTwoLeavesTheWriterIdle(t *testing.T) {
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 600 * time.Second, Preferred: 300 * time.Second}
	w, agents, writer := pdClientWorld(t, 2, first, "--dhcpv6-confirm-within", "30s")
	ctx := t.Context()
	_, _, confirmer := delegationConfirmed(t, w)
	pid := writer.Process.Pid
	t0 := cpuTicks(t, pid)
	time.Sleep(20 * time.Second)
	rest := cpuTicks(t, pid) - t0

	if err := agents[confirmer].Kill(); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, digest.Annotation, "v1;eth0=")
	if _, err := w.API.Client.CoreV1().Nodes().Patch(ctx, confirmer, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(45 * time.Second) // past the bound
	t1 := cpuTicks(t, pid)
	time.Sleep(20 * time.Second)
	stalled := cpuTicks(t, pid) - t1
	st := dpStatus(t, w, "home")
	t.Logf("writer CPU over 20 s: at rest %d ticks, stalled past the bound %d ticks (100 ticks = 1 s); dhcpv6pd %+v", rest, stalled, st.DHCPv6PD)
	if stalled > 10*rest+100 {
		t.Errorf("the writer spins while the pair stays stalled: %d ticks in 20 s (at rest %d)", stalled, rest)
	}
}
