package apply

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/permit"
)

// warnings records the reasons of the warning events.
type warnings []string

func (w *warnings) Event(_ *unstructured.Unstructured, warning bool, reason, _ string) bool {
	if warning {
		*w = append(*w, reason)
	}
	return true
}

// TestAFinalizerRefusedForWhatAWebhookAddedIsSaidOnce: the removal of the
// existing operator's finalizer from a DynamicPrefix, refused because a
// mutating webhook adds a key the admin did not list (renumber-writer-
// dynamicprefixes), is said once - one warning event, the fix in the
// error - and looked at again quietly after RefusedLookAgain, as a pool's
// or a Service's write is; retried with backoff, the DynamicPrefix's
// deletion logged "sync failed" at every retry.
func TestAFinalizerRefusedForWhatAWebhookAddedIsSaidOnce(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	client.PrependReactor("patch", "dynamicprefixes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(api.GVR.GroupResource(), "old", errors.New("ValidatingAdmissionPolicy 'renumber-writer-dynamicprefixes' "+
			"with binding 'renumber-writer-dynamicprefixes' denied request: "+MetadataRefusal+" a DynamicPrefix's labels or annotations"))
	})
	var events warnings
	var requeued []time.Duration
	w := &Writer{Gate: &permit.Gate{Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Events: &permit.Events{Recorder: &events},
		Breaker: permit.NewBreaker(permit.Limits{ObjectBurst: 10, ObjectPerMinute: 10, TotalBurst: 10, TotalPerMinute: 10}),
		Requeue: func(_ string, d time.Duration) { requeued = append(requeued, d) }}, Client: client}
	dp := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": "old", "resourceVersion": "7", "finalizers": []any{dynamicprefix.Finalizer}}}}
	for pass := range 2 {
		o := w.ReleaseFinalizer(t.Context(), dp)
		if o.Retry || o.Err == nil {
			t.Errorf("pass %d: %+v, want a refusal not retried", pass, o)
		}
		for _, fix := range []string{"admissionPolicies.webhookKeys", "leave the writer's ServiceAccount out of the webhook"} {
			if o.Err != nil && !strings.Contains(o.Err.Error(), fix) {
				t.Errorf("pass %d says %q, want the fix %q", pass, o.Err, fix)
			}
		}
	}
	if diff := cmp.Diff(warnings{RefusedForMetadata}, events); diff != "" {
		t.Errorf("warning events over two refused passes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{RefusedLookAgain, RefusedLookAgain}, requeued); diff != "" {
		t.Errorf("looked at again after (-want +got):\n%s", diff)
	}
}
