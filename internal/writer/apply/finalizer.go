package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/permit"
)

// ReleaseFinalizer removes the existing operator's finalizer from u, a
// DynamicPrefix being deleted whose objects were all released: the last step
// of its delete path, which that operator can no longer take. Only that
// finalizer goes (a merge patch of metadata.finalizers conditional on the
// version read, so another controller's finalizer added meanwhile is a
// conflict to retry, never dropped). renumber adds no finalizer of its own:
// a deleted DynamicPrefix is released from the informer's delete event.
func (w *Writer) ReleaseFinalizer(ctx context.Context, u *unstructured.Unstructured) permit.Outcome {
	if !slices.Contains(u.GetFinalizers(), dynamicprefix.Finalizer) {
		return permit.Outcome{}
	}
	self := permit.Object{Resource: "dynamicprefixes", Name: u.GetName()}
	if _, ok := w.finalized.Get(self, u.GetResourceVersion()); ok {
		return permit.Outcome{} // removed; the cache has not caught up
	}
	rest := slices.DeleteFunc(slices.Clone(u.GetFinalizers()), func(f string) bool { return f == dynamicprefix.Finalizer })
	if w.Shadow(permit.Change{Object: self.String(), Field: "metadata.finalizers", From: fmt.Sprint(u.GetFinalizers()), To: fmt.Sprint(rest)}) {
		return permit.Outcome{}
	}
	if err := w.Permit(self, u, u.GetName()); err != nil {
		return permit.Final(err)
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": u.GetResourceVersion(), "finalizers": rest}})
	if err != nil {
		return permit.Final(err)
	}
	if _, err := w.Client.Resource(api.GVR).Patch(ctx, u.GetName(), types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: permit.FieldManager}); err != nil {
		w.Unwritten(self, err)
		err = fmt.Errorf("removing the finalizer of DynamicPrefix %q: %w", u.GetName(), err)
		return w.failed(self, u, u.GetName(), "DynamicPrefix "+u.GetName(), err)
	}
	w.finalized.Put(self, u.GetResourceVersion(), struct{}{})
	permit.Counted("dynamicprefixes")
	w.Log.Info(fmt.Sprintf("DynamicPrefix %s released; finalizer %s removed", u.GetName(), dynamicprefix.Finalizer))
	return permit.Outcome{}
}
