package controller

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// admitting makes f's controller wait up to seen for admission after a
// status names a new prefix, and the API server refuse the first refusals
// dry runs of a pool write (-1: every one). It returns the dry runs asked.
func (f *fixture) admitting(limits permit.Limits, seen time.Duration, refusals int32) *atomic.Int32 {
	f.ctl = NewController(Config{Budget: limits, TargetKeys: holdings.DefaultTargetKeys, StatusSeen: seen},
		f, f.votes, f.dyn, f.meta, f.clock, slog.New(slog.NewTextHandler(io.Discard, nil)), f.events)
	var dryRuns atomic.Int32
	f.dyn.PrependReactor("patch", "ciliumloadbalancerippools", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchActionImpl)
		if !slices.Contains(p.PatchOptions.DryRun, metav1.DryRunAll) {
			return false, nil, nil
		}
		if n := dryRuns.Add(1); refusals < 0 || n <= refusals {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "cilium.io", Resource: "ciliumloadbalancerippools"}, "lb",
				errors.New("the writer may add to a pool only blocks inside the prefixes DynamicPrefix home names in its status"))
		}
		return true, nil, nil // admitted; a dry run stores nothing
	})
	return &dryRuns
}

// pass runs one pass over home and returns its writes and outcome.
func (f *fixture) pass() ([]string, permit.Outcome) {
	f.t.Helper()
	f.writes = nil
	o := f.ctl.Sync(f.t.Context(), passHome)
	if o.Err != nil && o.Retry {
		f.t.Fatalf("pass: %v", o.Err)
	}
	got := slices.Clone(f.writes)
	slices.Sort(got)
	return got, o
}

// Under load the API server's admission policy can see the status naming a
// new prefix later than the writer's cache does. The pass that names it ends
// there; the passes after it ask a dry run of the first pool write, one each,
// and look again later while it is refused; the admitted one writes each
// object once: no refused write, no PoolError, and the renumbering writes
// what it writes without the wait (status, pool, Service: three).
func TestTheFirstPoolWriteWaitsUntilAdmissionSeesTheStatus(t *testing.T) {
	f := converged(t, generous)
	dryRuns := f.admitting(generous, 10*time.Second, 2)
	counted := permit.DryRuns()
	f.report(3, prefixB, prefixA)
	type step struct {
		writes  []string
		after   time.Duration
		dryRuns int32
	}
	want := []step{
		{[]string{"patch dynamicprefixes/status home"}, lookAgain, 0}, // the status names B; the cache has not shown it
		{nil, firstDryRun, 1},     // seen; admission has not seen it
		{nil, 2 * firstDryRun, 2}, // asked again, on the clock
		{[]string{"patch ciliumloadbalancerippools lb", "patch services web"}, 0, 3},
	}
	var all []string
	for i, w := range want {
		if i > 0 {
			f.catchUp()
		}
		got, o := f.pass()
		all = append(all, got...)
		if !slices.Equal(got, w.writes) || o.After != w.after || dryRuns.Load() != w.dryRuns {
			t.Fatalf("pass %d wrote %q, looks again after %s, %d dry runs; want %q, %s, %d",
				i+1, got, o.After, dryRuns.Load(), w.writes, w.after, w.dryRuns)
		}
		f.clock.Step(o.After) // the queue's wait
	}
	if len(all) != 3 {
		t.Errorf("the renumbering wrote %q, want three writes, one per object", all)
	}
	if n := permit.DryRuns() - counted; n != 3 {
		t.Errorf("the permit counted %d dry runs, want the 3 sent", n)
	}
	if c := f.condition(render.PoolsSynced); c.Status != metav1.ConditionTrue {
		t.Errorf("PoolsSynced %s %s", c.Status, c.Message)
	}

	// Nothing to write: no dry run either.
	f.catchUp()
	dryRuns.Store(0)
	if got, o := f.pass(); len(got) != 0 || o.After != 0 || dryRuns.Load() != 0 {
		t.Errorf("again: wrote %q, looks again after %s, after %d dry runs", got, o.After, dryRuns.Load())
	}
}
