package e2e

import (
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/tools/world"
)

// productionTimings are the writer's shipped defaults (manifests/writer), spelled
// out so the test still means the same if a flag default moves.
var productionTimings = []string{"--lease-duration", "60s", "--renew-deadline", "40s", "--retry-period", "5s"}

// long skips a scenario that takes minutes unless E2E_FULL is set (make e2e).
func long(t *testing.T) {
	t.Helper()
	if os.Getenv("E2E_FULL") == "" {
		t.Skip("long scenario: runs with make e2e (E2E_FULL=1)")
	}
}

// TestThirtySecondStallKeepsTheLease (scenario 5): with production timings an
// API server that stops answering for 30 s - shorter than the 40 s renew
// deadline - costs nothing: the same leader, no lease transition, no restart,
// and a prefix change made during the stall is applied after it.
func TestThirtySecondStallKeepsTheLease(t *testing.T) {
	w, writers, pids := stallWorld(t, productionTimings)
	ctx := t.Context()
	leases := w.API.Client.CoordinationV1().Leases(world.Namespace)
	before, err := leases.Get(ctx, "renumber-writer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	stallWithAChange(t, w, 30*time.Second)
	eventually(t, "the change made during the stall lands", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == prefixB.String(), st.CurrentPrefix
	})

	after, err := leases.Get(ctx, "renumber-writer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *after.Spec.HolderIdentity != *before.Spec.HolderIdentity || *after.Spec.LeaseTransitions != *before.Spec.LeaseTransitions {
		t.Errorf("lease moved: %s (transitions %d) -> %s (transitions %d)", *before.Spec.HolderIdentity, *before.Spec.LeaseTransitions,
			*after.Spec.HolderIdentity, *after.Spec.LeaseTransitions)
	}
	for _, n := range writers {
		if got := countLog(w, n+".log", "lost the lease"); got != 0 {
			t.Errorf("%s lost its lease in a stall shorter than the renew deadline", n)
		}
		if got := countLog(w, n+".log", "writer started"); got != 1 || !alive(pids[n]) {
			t.Errorf("%s: started %d times, alive %v", n, got, alive(pids[n]))
		}
	}
	if got := countLog(w, *before.Spec.HolderIdentity+".log", "leading"); got != 1 {
		t.Errorf("the leader logged %d terms, want 1", got)
	}
}

// TestNinetySecondStallWithProductionTimings (scenario 6, make e2e): longer than
// the lease itself, so the lease is lost; the processes stay, campaign again and
// exactly one leader converges the change made during the stall.
func TestNinetySecondStallWithProductionTimings(t *testing.T) {
	long(t)
	stallPastTheLease(t, productionTimings, 90*time.Second)
}
