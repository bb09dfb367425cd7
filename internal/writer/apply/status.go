package apply

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// LiveStatus is u's status as the writer last wrote it, while the cache has not
// shown that write yet, or as the cache shows it.
func (w *Writer) LiveStatus(u *unstructured.Unstructured, cached api.Status) api.Status {
	if st, ok := w.statuses.Get(permit.Object{Resource: "dynamicprefixes", Name: u.GetName()}, u.GetResourceVersion()); ok {
		return st
	}
	return cached
}

// StatusBehind reports whether the cache's u has not yet seen the writer's
// own last status write to it (permit.Memo.Behind): a pass over it then
// writes nothing and looks again once the cache shows it. Under load the
// watch lags the writes: a status written from such a cache is made against
// a version that is gone, and refused with a conflict.
func (w *Writer) StatusBehind(u *unstructured.Unstructured) bool {
	return w.statuses.Behind(permit.Object{Resource: "dynamicprefixes", Name: u.GetName()}, u.GetResourceVersion())
}

// Live is a DynamicPrefix as the writer knows it: the object a status write
// is made against, and its status.
type Live struct {
	Object *unstructured.Unstructured
	Status api.Status
}

// Status writes st as the status of live.Object when it differs from
// live.Status, and returns what is live afterwards: the object at the version
// the write made, and st (also when the write was only planned).
func (w *Writer) Status(ctx context.Context, live Live, st api.Status) (Live, permit.Outcome) {
	u := live.Object
	self := permit.Object{Resource: "dynamicprefixes", Name: u.GetName()}
	if render.StatusEqual(st, live.Status) {
		w.Calm(self, u.GetName())
		return live, permit.Outcome{}
	}
	if w.Shadow(statusChanges(self, live.Status, st)...) {
		return Live{Object: u, Status: st}, permit.Outcome{}
	}
	if err := w.Permit(self, u, u.GetName()); err != nil {
		return live, permit.Final(err) // requeued for when a permit is back
	}
	patch, err := api.StatusPatch(live.Status, st)
	if err != nil {
		return live, permit.Final(err)
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": u.GetResourceVersion()},
		"status":   patch,
	})
	if err != nil {
		return live, permit.Final(err)
	}
	got, err := w.Client.Resource(api.GVR).Patch(ctx, u.GetName(), types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: permit.FieldManager}, "status")
	if err != nil {
		w.Unwritten(self, err)
		return live, permit.Transient(fmt.Errorf("patching status of DynamicPrefix %q: %w", u.GetName(), err))
	}
	made := ""
	if got != nil {
		made = got.GetResourceVersion()
	}
	w.statuses.PutMade(self, u.GetResourceVersion(), made, st)
	permit.Counted("dynamicprefixes/status")
	var fields []string
	for _, c := range statusChanges(self, live.Status, st) {
		fields = append(fields, c.Field)
	}
	w.Log.Debug("DynamicPrefix "+u.GetName()+" status updated", "fields", fields)
	// A later write in the same pass is made against the version this one
	// made (the cached object, u, is never changed).
	next := u.DeepCopy()
	if made != "" {
		next.SetResourceVersion(made)
	}
	return Live{Object: next, Status: st}, permit.Outcome{}
}
