package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/tools/world"
)

// TestWriteStormBreaker: another client keeps reverting a pool the writer
// manages. Without a breaker every revert would be answered by a write (a write
// storm between two controllers); with it the writer's writes to that pool stay
// within burst + rate x time, it says so (Degraded condition, one event), and it
// converges by itself once the fight stops.
func TestWriteStormBreaker(t *testing.T) {
	w := homeWorld(t, 1)
	ctx := t.Context()
	startAgent(t, w, "node1")
	// Budget per object: burst 3, then one write per 10 s.
	startWriter(t, w, "writer-a", "--budget-object-burst", "3", "--budget-object-per-minute", "6")
	want := []string{"192.0.2.0/24", prefixA.String()}
	eventually(t, "pool filled", func() (bool, string) {
		b := blocks(t, w, "lb")
		return slices.Equal(b, want), fmt.Sprint(b)
	})
	settleWrites()

	m := mark(t, w)
	fight := 20 * time.Second
	revert := []byte(`{"spec":{"blocks":[{"cidr":"192.0.2.0/24"}]}}`)
	sawDegraded := false
	for end := time.Now().Add(fight); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if _, err := w.API.Dynamic.Resource(poolGVR).Patch(ctx, "lb", types.MergePatchType, revert, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, c := range dpStatus(t, w, "home").Conditions {
			if c.Type == "Degraded" && c.Status == "True" && c.Reason == "WriteBudgetExceeded" {
				sawDegraded = true
			}
		}
	}
	ws, err := w.API.WritesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	poolWrites := 0
	for _, wr := range world.Filter(ws, world.ByUser(writerUser)) {
		if wr.Resource == "ciliumloadbalancerippools" {
			poolWrites++
		}
	}
	// 80 reverts; the budget allows the decision's free writes the pool's
	// fill left (permit.FreeWrites - 1), then 3 + 20 s x 6/min = 5, plus one
	// refill at the edge.
	t.Logf("%d writer patches to the pool during %d reverts", poolWrites, int(fight/(250*time.Millisecond)))
	if bound := permit.FreeWrites - 1 + 6; poolWrites > bound {
		t.Errorf("%d pool writes during the fight, budget allows at most %d", poolWrites, bound)
	}
	if poolWrites < 3 {
		t.Errorf("%d pool writes: the writer should have kept correcting the pool within its budget", poolWrites)
	}
	if !sawDegraded {
		t.Error("Degraded/WriteBudgetExceeded never showed during the fight")
	}
	waitEvent(t, w, "WriteBudgetExceeded", "lb")

	// The fight is over: the writer converges by itself and clears the condition.
	eventually(t, "pool converges after the fight", func() (bool, string) {
		b := blocks(t, w, "lb")
		return slices.Equal(b, want), fmt.Sprint(b)
	})
	eventually(t, "Degraded cleared", func() (bool, string) {
		for _, c := range dpStatus(t, w, "home").Conditions {
			if c.Type == "Degraded" {
				return c.Status == "False", c.Reason
			}
		}
		return false, ""
	})
	evs, err := w.API.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		if e.Reason == "WriteBudgetExceeded" && e.Regarding.Name == "lb" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d WriteBudgetExceeded events for the pool, want 1", n)
	}
}
