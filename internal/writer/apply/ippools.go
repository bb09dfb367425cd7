// IPPools writes Calico's IPPools that follow a DynamicPrefix. An
// IPPool holds one CIDR and Calico refuses to change it in place while it is
// in use, so the annotated pool gets the current prefix and each draining
// prefix lives in a disabled sibling pool this package creates, updates and
// deletes as the history moves (backends.RenderCalico renders them). Every write
// passes the write gate (package write).

package apply

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// IPPools writes IPPools.
type IPPools struct {
	*permit.Gate
	Client dynamic.Interface

	memo permit.Memo[string] // what was written last, until the cache shows it
}

// Sync writes the Calico IPPools that follow m's DynamicPrefix (the cache is
// nil when IPPools are not served): siblings no longer draining are deleted
// first, then each annotated pool gets the current CIDR, then the draining
// siblings are created or updated - so no two pools ever hold the same CIDR, a
// prefix coming back included.
func (w *IPPools) Sync(ctx context.Context, pools backends.IPPools, gvr schema.GroupVersionResource, m model.Model, d decide.Decision) permit.Outcomes {
	if pools.Store == nil {
		return nil
	}
	var out permit.Outcomes
	type planned struct {
		parent *backends.IPPool
		plan   backends.CalicoPlan
	}
	var plans []planned
	want := map[string]bool{}
	for _, p := range pools.Released() {
		out = append(out, w.parent(ctx, gvr, p, m.Name, "")) // no longer follows anything
	}
	for _, u := range pools.Following(m.Name) {
		entries, err := render.PoolEntries(m, u.Follow, d.Pooled, holdings.CIDRs)
		if err != nil {
			err = fmt.Errorf("IPPool %q: %w", u.Name(), err)
			w.Events.Announce("pool/ippools/"+u.Name(), u.Live, true, "InvalidPoolReference", err.Error())
			out = append(out, permit.Final(err))
			continue
		}
		p := backends.RenderCalico(u, m.Name, entries)
		adopt(pools, u.Name(), &p)
		plans = append(plans, planned{u, p})
		for _, s := range p.Siblings {
			want[s.Name] = true
		}
	}
	// Each stage runs only once the one before succeeded whole: a refused,
	// conflicting or failed write ends the pass here (its outcome brings the
	// next one), so a pool never takes a CIDR a sibling still holds, and a
	// sibling is never created for a CIDR its pool still holds.
	stage := w.deleteSiblings(ctx, pools, gvr, m.Name, want)
	if out = append(out, stage...); stage.Err() != nil {
		return out
	}
	stage = nil
	for _, p := range plans {
		stage = append(stage, w.parent(ctx, gvr, p.parent, m.Name, p.plan.CIDR))
	}
	if out = append(out, stage...); stage.Err() != nil {
		return out
	}
	for _, p := range plans {
		for _, s := range p.plan.Siblings {
			out = append(out, w.sibling(ctx, pools, gvr, p.parent, m.Name, s))
		}
	}
	return out
}

// parent makes the annotated pool hold cidr, and our record say so
// ("" removes the record and leaves the CIDR: a pool must have one).
func (w *IPPools) parent(ctx context.Context, gvr schema.GroupVersionResource, p *backends.IPPool, dp, cidr string) permit.Outcome {
	u := p.Live
	self := permit.Object{Resource: backends.CalicoResource, Name: u.GetName()}
	live, record := p.CIDR, p.Record
	if last, ok := w.memo.Get(self, u.GetResourceVersion()); ok {
		live, record = last, last
	}
	if record == cidr && (cidr == "" || holdings.Canonical(live) == cidr) {
		w.Calm(self, dp)
		return permit.Outcome{}
	}
	if w.Shadow(permit.Change{Object: self.String(), Field: "spec.cidr", From: live, To: cmp.Or(cidr, live)},
		permit.Change{Object: self.String(), Field: "metadata.annotations." + backends.CalicoRecordKey, From: record, To: cidr}) {
		return permit.Outcome{}
	}
	if err := w.Permit(self, u, dp); err != nil {
		return permit.Final(err)
	}
	var rec any
	patch := map[string]any{}
	if cidr != "" {
		rec, patch["spec"] = cidr, map[string]any{"cidr": cidr}
	}
	patch["metadata"] = map[string]any{"resourceVersion": u.GetResourceVersion(),
		"annotations": map[string]any{backends.CalicoRecordKey: rec, backends.CalicoLegacyRecordKey: nil}}
	body, err := json.Marshal(patch)
	if err != nil {
		return permit.Final(err)
	}
	if _, err := w.Client.Resource(gvr).Patch(ctx, u.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: permit.FieldManager}); err != nil {
		w.Unwritten(self, err)
		return permit.Transient(fmt.Errorf("patching IPPool %q: %w", u.GetName(), err))
	}
	w.memo.Put(self, u.GetResourceVersion(), cidr)
	permit.Counted(backends.CalicoResource)
	if cidr == "" {
		w.Log.Info("IPPool " + u.GetName() + " released")
		w.Events.Event(u, "PoolReleased", "record removed, spec.cidr left as it was (a pool must have one)")
		return permit.Outcome{}
	}
	w.Log.Info("IPPool "+u.GetName()+" updated", "cidr", cidr, "was", live)
	w.Events.Event(u, "PoolUpdated", fmt.Sprintf("spec.cidr now %s (was %s)", cidr, live))
	return permit.Outcome{}
}

// sibling creates the sibling s of parent, or updates it to s.
func (w *IPPools) sibling(ctx context.Context, pools backends.IPPools, gvr schema.GroupVersionResource, p *backends.IPPool, dp string, s backends.CalicoPool) permit.Outcome {
	self := permit.Object{Resource: backends.CalicoResource, Name: s.Name}
	parent := p.Live
	var live *unstructured.Unstructured
	cached, found := pools.Get(s.Name)
	if found {
		live = cached.Live
	}
	if _, ok := w.memo.Get(self, ""); ok && live == nil {
		return permit.Outcome{} // created; the cache has not shown it yet
	}
	if live != nil {
		if _, ok := w.memo.Get(self, live.GetResourceVersion()); ok || backends.SameCalico(cached, s) {
			w.Calm(self, dp)
			return permit.Outcome{}
		}
	}
	if live == nil && w.Shadow(permit.Created(self, s.Spec)) {
		return permit.Outcome{}
	}
	if live != nil && w.Shadow(permit.Updated(self, cached.Settings, s.Spec)) {
		return permit.Outcome{}
	}
	if err := w.Permit(self, parent, dp); err != nil {
		return permit.Final(err)
	}
	res := w.Client.Resource(gvr)
	if live == nil {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": "IPPool",
			"metadata": map[string]any{"name": s.Name}, "spec": s.Spec,
		}}
		u.SetLabels(s.Labels)
		// Deleting the user's pool deletes its siblings.
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(),
			Name: parent.GetName(), UID: parent.GetUID()}})
		if _, err := res.Create(ctx, u, metav1.CreateOptions{FieldManager: permit.FieldManager}); err != nil {
			w.Unwritten(self, err)
			return permit.Transient(fmt.Errorf("creating IPPool %q: %w", s.Name, err))
		}
		w.memo.Put(self, "", s.Name)
		permit.Counted(backends.CalicoResource)
		w.Log.Info("IPPool "+s.Name+" created", "cidr", s.Spec["cidr"], "draining", true)
		w.Events.Event(parent, "PoolCreated", fmt.Sprintf("IPPool %s holds draining %v, disabled", s.Name, s.Spec["cidr"]))
		return permit.Outcome{}
	}
	// A setting its pool no longer has goes too (null, in a merge patch): a
	// sibling is its pool's copy, and renumber-writer-siblings admits no
	// other.
	spec := map[string]any{}
	for k := range cached.Settings {
		spec[k] = nil
	}
	for k, v := range s.Spec {
		spec[k] = v
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": live.GetResourceVersion(), "labels": s.Labels},
		"spec":     spec,
	})
	if err != nil {
		return permit.Final(err)
	}
	if _, err := res.Patch(ctx, s.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: permit.FieldManager}); err != nil {
		w.Unwritten(self, err)
		return permit.Transient(fmt.Errorf("patching IPPool %q: %w", s.Name, err))
	}
	w.memo.Put(self, live.GetResourceVersion(), s.Name)
	permit.Counted(backends.CalicoResource)
	w.Log.Info("IPPool "+s.Name+" updated (follows "+parent.GetName()+")", "cidr", s.Spec["cidr"])
	return permit.Outcome{}
}

// deleteSiblings deletes the siblings of dp that keep does not name.
func (w *IPPools) deleteSiblings(ctx context.Context, pools backends.IPPools, gvr schema.GroupVersionResource, dp string, keep map[string]bool) permit.Outcomes {
	var out permit.Outcomes
	for _, s := range pools.Siblings(dp) {
		u := s.Live
		if keep[u.GetName()] {
			continue
		}
		self := permit.Object{Resource: backends.CalicoResource, Name: u.GetName()}
		if _, ok := w.memo.Get(self, u.GetResourceVersion()); ok {
			continue // deleted; the cache has not caught up
		}
		if w.Shadow(permit.Removed(self)) {
			continue
		}
		rv := u.GetResourceVersion()
		if err := w.Client.Resource(gvr).Delete(ctx, u.GetName(), metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}); err != nil {
			out = append(out, permit.Transient(fmt.Errorf("deleting IPPool %q: %w", u.GetName(), err)))
			continue
		}
		w.memo.Put(self, u.GetResourceVersion(), "")
		permit.Counted(backends.CalicoResource)
		w.Log.Info("IPPool "+u.GetName()+" deleted", "cidr", s.CIDR)
		w.Events.Event(u, "PoolDeleted", fmt.Sprintf("%s no longer drains for DynamicPrefix %s", s.CIDR, dp))
	}
	return out
}

// Release deletes dp's siblings and removes our record from the pools naming
// dp, which was deleted; their spec.cidr stays (a pool must have one).
func (w *IPPools) Release(ctx context.Context, pools backends.IPPools, gvr schema.GroupVersionResource, dp string) permit.Outcomes {
	if pools.Store == nil {
		return nil
	}
	out := w.deleteSiblings(ctx, pools, gvr, dp, nil)
	for _, p := range pools.Following(dp) {
		if p.Recorded {
			out = append(out, w.parent(ctx, gvr, p, dp, ""))
		}
	}
	return out
}

// adopt points p's siblings at the siblings the existing operator created for
// the same parent and CIDR, so that a switch neither writes them nor creates
// a second pool for one CIDR.
func adopt(pools backends.IPPools, parent string, p *backends.CalicoPlan) {
	for i, s := range p.Siblings {
		for _, u := range pools.SiblingsOf(parent) {
			if u.Adopted && holdings.Canonical(u.CIDR) == s.Spec["cidr"] {
				p.Siblings[i].Name = u.Name()
			}
		}
	}
}
