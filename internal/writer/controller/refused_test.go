package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/renumber/renumber/internal/writer/apply"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/render"
)

// refusedForMetadata is the API server refusing the writer's write to the
// object name of gr because renumber-writer-services (or -pools) saw a
// label or an annotation change the writer did not write: a mutating
// webhook added it on the way.
func refusedForMetadata(gr schema.GroupResource, name string) clienttesting.ReactionFunc {
	return func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(gr, name, errors.New("ValidatingAdmissionPolicy 'renumber-writer-services' with binding "+
			"'renumber-writer-services' denied request: "+apply.MetadataRefusal+" a Service's spec, labels, finalizers or owners"))
	}
}

// A mutating webhook that adds a label to a Service (or a pool) on every
// update has every write of the writer's to it refused, for ever: that is
// said once - one warning event on the object naming the likely cause, the
// condition - and not retried at every backoff (the log line of each retry
// said only "sync failed"); the other objects of the pass are written.
func TestAWriteRefusedForWhatAWebhookAddedIsSaidOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		refuse   func(f *fixture)
		object   string // "reason name" of the event
		otherOne string // a write the pass still makes
	}{
		{"a Service", func(f *fixture) {
			f.meta.PrependReactor("patch", "services", refusedForMetadata(schema.GroupResource{Resource: "services"}, "web"))
		}, apply.RefusedForMetadata + " web", "patch " + backends.PoolResource + " lb"},
		{"a pool", func(f *fixture) {
			f.dyn.PrependReactor("patch", backends.PoolResource, refusedForMetadata(schema.GroupResource{Group: "cilium.io", Resource: backends.PoolResource}, "lb"))
		}, apply.RefusedForMetadata + " lb", "patch services web"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := converged(t, generous)
			c.refuse(f)
			f.report(3, prefixB, prefixA)
			f.writes = nil
			if o := f.ctl.Sync(t.Context(), passHome); o.Retry {
				t.Errorf("the refused write: %+v, want an outcome not retried", o)
			}
			if !slices.Contains(f.writes, c.otherOne) {
				t.Errorf("the pass wrote %q, want %q too", f.writes, c.otherOne)
			}
			f.catchUp()
			f.ctl.Sync(t.Context(), passHome) // the next pass meets the same refusal
			n := 0
			for _, w := range f.events.warnings {
				if w == c.object {
					n++
				}
			}
			if n != 1 {
				t.Errorf("warnings %q over two refused passes, want one %q", f.events.warnings, c.object)
			}
			if cond := f.condition(render.PoolsSynced); cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "mutating webhook") {
				t.Errorf("PoolsSynced %s %q, want False naming a mutating webhook as the likely cause", cond.Status, cond.Message)
			}
			// and both fixes: the key listed, or the writer left out.
			for _, fix := range []string{"admissionPolicies.webhookKeys", "leave the writer's ServiceAccount out of the webhook"} {
				if cond := f.condition(render.PoolsSynced); !strings.Contains(cond.Message, fix) {
					t.Errorf("PoolsSynced says %q, want the fix %q", cond.Message, fix)
				}
			}
		})
	}
}
