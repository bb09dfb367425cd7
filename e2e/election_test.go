package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/tools/world"
)

// TestLeaseLostDuringAStallIsNotAnExit stalls the API server (SIGSTOP) for longer
// than the renew deadline: the leader must stop writing, stay alive, campaign
// again in the same process, and after the stall exactly one leader converges a
// prefix change made during it.
func TestLeaseLostDuringAStallIsNotAnExit(t *testing.T) {
	// Stall for 3x the renew deadline (8 s in these tests): every lease expires.
	stallPastTheLease(t, nil, 24*time.Second)
}

// stallWorld is one node following A and two writers with timings; it returns
// the writers' names and PIDs once status follows A.
func stallWorld(t *testing.T, timings []string) (*world.World, []string, map[string]int) {
	t.Helper()
	w := newWorld(t, 1)
	advertise(t, w, prefixA)
	minimalDP(t, w, "home")
	startAgent(t, w, "node1")
	writers := []string{"writer-a", "writer-b"}
	pids := map[string]int{}
	for _, n := range writers {
		pids[n] = startWriter(t, w, n, timings...).Process.Pid
	}
	eventually(t, "status follows A", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == prefixA.String(), st.CurrentPrefix
	})
	return w, writers, pids
}

// stallWithAChange stops the API server for stall, renumbering A -> B meanwhile.
func stallWithAChange(t *testing.T, w *world.World, stall time.Duration) {
	t.Helper()
	if err := w.API.Pause(true); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixB, prefixA)
	time.Sleep(stall)
	if err := w.API.Pause(false); err != nil {
		t.Fatal(err)
	}
}

func stallPastTheLease(t *testing.T, timings []string, stall time.Duration) {
	w, writers, procs := stallWorld(t, timings)
	ctx := t.Context()
	stallWithAChange(t, w, stall)

	eventually(t, "the change made during the stall lands", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == prefixB.String(), st.CurrentPrefix
	})
	lost := 0
	for _, n := range writers {
		if countLog(w, n+".log", "lost the lease") > 0 {
			lost++
			if got := countLog(w, n+".log", "writer started"); got != 1 {
				t.Errorf("%s started %d times: losing the lease must not restart it", n, got)
			}
		}
		if countLog(w, n+".log", "writer failed") > 0 {
			t.Errorf("%s exited", n)
		}
	}
	if lost == 0 {
		t.Error("no writer reported losing its lease during a stall three times the renew deadline")
	}
	for n, pid := range procs {
		if !alive(pid) {
			t.Errorf("%s (pid %d) is gone", n, pid)
		}
	}
	lease, err := w.API.Client.CoordinationV1().Leases(world.Namespace).Get(ctx, "renumber-writer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder := *lease.Spec.HolderIdentity; !slices.Contains(writers, holder) {
		t.Errorf("lease holder %q after the stall", holder)
	}
	leading := 0
	for _, n := range writers {
		// Each term logs "leading" once; the current leader's last role line says so.
		b := lastLine(w, n+".log", []string{"leading", "following", "lost the lease"})
		if strings.Contains(b, "leading") {
			leading++
		}
	}
	if leading != 1 {
		t.Errorf("%d writers consider themselves leader after the stall, want 1", leading)
	}
}
