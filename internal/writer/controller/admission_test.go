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

	"github.com/renumber/renumber/internal/writer/render"
)

// Under load the API server's admission policy can see the status naming a
// new prefix later than the writer's cache does: the first pool write then
// waits for a dry run of it to be admitted, and the pass writes each object
// once, with no refused write and no PoolError.
func TestTheFirstPoolWriteWaitsUntilAdmissionSeesTheStatus(t *testing.T) {
	f := converged(t, generous)
	f.ctl = NewController(Config{Budget: generous, TargetKeys: render.DefaultTargetKeys, StatusSeen: time.Second},
		f, f.votes, f.dyn, f.meta, f.clock, slog.New(slog.NewTextHandler(io.Discard, nil)), f.events)
	var dryRuns, refused atomic.Int32
	f.dyn.PrependReactor("patch", "ciliumloadbalancerippools", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchActionImpl)
		if !slices.Contains(p.PatchOptions.DryRun, metav1.DryRunAll) {
			return false, nil, nil
		}
		if dryRuns.Add(1) <= 2 {
			refused.Add(1)
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "cilium.io", Resource: "ciliumloadbalancerippools"}, "lb",
				errors.New("the writer may add to a pool only blocks inside the prefixes DynamicPrefix home names in its status"))
		}
		return true, nil, nil // admitted; a dry run stores nothing
	})
	f.report(3, prefixB, prefixA)
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Errorf("the renumbering wrote %q, want %q", got, want)
	}
	if dryRuns.Load() != 3 || refused.Load() != 2 {
		t.Errorf("%d dry runs (%d refused), want 3: asked again until admitted", dryRuns.Load(), refused.Load())
	}
	if c := f.condition(render.PoolsSynced); c.Status != metav1.ConditionTrue {
		t.Errorf("PoolsSynced %s %s", c.Status, c.Message)
	}

	// Nothing to write: no dry run either.
	f.catchUp()
	dryRuns.Store(0)
	if got := f.sync(passHome); len(got) != 0 || dryRuns.Load() != 0 {
		t.Errorf("again: wrote %q after %d dry runs", got, dryRuns.Load())
	}
}
