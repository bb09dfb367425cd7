package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// Pools writes every pool, of the kinds given, that follows m's DynamicPrefix.
func (w *Writer) Pools(ctx context.Context, pools []backends.Cached, m model.Model, d decide.Decision) permit.Outcomes {
	var out permit.Outcomes
	for p := range poolsFollowing(pools, m.Name) {
		if p.Kind.Claims {
			continue // written with the Services (Writer.Services)
		}
		if p.Err != nil {
			out = append(out, w.unreadable(p))
			continue
		}
		out = append(out, w.pool(ctx, p, m, d))
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// unreadable reports a pool whose entries cannot be read: the user's to fix.
// It is never written (its user entries could not be kept).
func (w *Writer) unreadable(p *backends.Pool) permit.Outcome {
	err := fmt.Errorf("%s %q: %w", p.Kind.Name, p.Key(), p.Err)
	w.Events.Announce("pool/"+p.Kind.Resource+"/"+p.Key(), p.Live, true, "InvalidPool", err.Error())
	return permit.Final(err)
}

// poolsFollowing yields every pool of the kinds given that follows the
// DynamicPrefix name, as its cache read it.
func poolsFollowing(pools []backends.Cached, name string) iter.Seq[*backends.Pool] {
	return func(yield func(*backends.Pool) bool) {
		for _, c := range pools {
			for _, p := range c.Following(name) {
				if !yield(p) {
					return
				}
			}
		}
	}
}

// poolPlan is one pool's write for a decision.
type poolPlan struct {
	self  permit.Object
	po    backends.Object // as last written, when that is newer than the cache
	write holdings.Write
}

// plan is the pool's write for the decision, from what it holds as last
// written (the cache, or the writer's own newer write): one call to render.
// An error is the pool's reference to a range or subnet that the spec cannot
// resolve.
func (w *Writer) plan(k *backends.Kind, po backends.Object, m model.Model, d decide.Decision) (poolPlan, error) {
	pl := poolPlan{self: permit.Object{Resource: k.Resource, Namespace: po.Namespace, Name: po.Name}}
	if last, ok := w.pools.Get(pl.self, po.ResourceVersion); ok {
		po.Held, po.RecordFrom = last, k.RecordKey
	}
	pl.po = po
	write, err := render.Pool(m, po.Held, d.Pooled, d.Managed, k.ClaimExact)
	if err != nil {
		return pl, fmt.Errorf("%s %q: %w", k.Name, po.Key(), err)
	}
	pl.write = write
	return pl, nil
}

func (w *Writer) pool(ctx context.Context, p *backends.Pool, m model.Model, d decide.Decision) permit.Outcome {
	k, u := p.Kind, p.Live
	pl, err := w.plan(k, p.Object, m, d)
	self, po, write := pl.self, pl.po, pl.write
	if err != nil {
		w.Events.Announce("pool/"+self.String(), u, true, "InvalidPoolReference", err.Error())
		return permit.Final(err)
	}
	if write.Holds {
		w.Events.Forget("pool/" + self.String())
		w.Calm(self, m.Name)
		return permit.Outcome{}
	}
	if w.pools.Behind(self, po.ResourceVersion) {
		// The cache has not shown our last write to it yet: a write made
		// now would be against a version that is gone (a 409). Its watch
		// event brings the next pass.
		return permit.Later(CacheBehind)
	}
	if w.Shadow(poolChanges(self, k, po, write)...) {
		return permit.Outcome{}
	}
	if err := w.Permit(self, u, m.Name); err != nil {
		return permit.Final(err)
	}
	if len(po.Record.Unreadable) > 0 {
		w.Events.Announce("record/"+self.String(), u, true, "RecordNotUnderstood", fmt.Sprintf(
			"%s names %s, which is no entry: it owns nothing, so the entries of this pool are kept, and the record is rewritten without it",
			po.RecordFrom, strings.Join(po.Record.Unreadable, ", ")))
	}
	if err := patchPool(ctx, w.Client, k, po, write, false, nil); err != nil {
		w.Unwritten(self, err)
		if errors.Is(err, model.ErrInvalid) || refusedForItsSize(err) { // nothing to retry: the user's to fix
			err = fmt.Errorf("%s %q: %w", k.Name, po.Key(), err)
			w.Events.Announce("pool/"+self.String(), u, true, "InvalidPool", err.Error())
			return permit.Final(err)
		}
		return w.failed(self, u, m.Name, fmt.Sprintf("%s %q", k.Name, po.Key()), err)
	}
	w.Events.Forget("refused/" + self.String())
	w.pools.Put(self, po.ResourceVersion, po.After(write))
	permit.Counted(k.Resource)
	added, removed := changed(po.Entries, write.Entries)
	note := fmt.Sprintf("managed entries now %s", strings.Join(write.Record, ", "))
	if len(removed) > 0 {
		note += fmt.Sprintf("; removed %s", strings.Join(removed, ", "))
	}
	w.Log.Info(fmt.Sprintf("%s %s updated", k.Name, po.Key()), "managed", write.Record, "added", added, "removed", removed)
	w.Events.Event(u, "PoolUpdated", note)
	w.Events.Forget("pool/" + self.String())
	return permit.Outcome{}
}

// ReleasePool removes our entries and record from the pool key ("name" or
// "namespace/name") when it names dp: "" once its dynamic-prefix.io/name
// annotation was removed, or a DynamicPrefix that was deleted. Nothing else is
// touched. A refused permit returns how long to wait.
func (w *Writer) ReleasePool(ctx context.Context, p backends.Cached, key, dp string) (permit.Outcome, time.Duration) {
	read, exists := p.Get(key)
	if !exists {
		return permit.Transient(nil), 0
	}
	why := "dynamic-prefix.io/name removed"
	if dp != "" {
		why = fmt.Sprintf("DynamicPrefix %s deleted", dp)
	}
	return w.release(ctx, read, dp, why, false)
}

// releasePool is ReleasePool of a pool that still follows dp but may hold
// none of its addresses (why says so): a refused permit is a pass later.
// Its record is emptied, not removed: dp lives, and renumber-writer-values
// refuses a record's removal from what follows it (an object without one
// would have its first write own the user's entries equal to ours).
func (w *Writer) releasePool(ctx context.Context, read *backends.Pool, dp, why string) permit.Outcome {
	o, wait := w.release(ctx, read, dp, why, true)
	if wait > 0 {
		return permit.Later(wait)
	}
	return o
}

// release removes our entries and record from the pool read (empties the
// record: keep), saying why.
func (w *Writer) release(ctx context.Context, read *backends.Pool, dp, why string, keep bool) (permit.Outcome, time.Duration) {
	k := read.Kind
	if read.Err != nil {
		return permit.Final(read.Err), 0
	}
	u, po := read.Live, read.Object
	if !read.Ours || po.Follow.DynamicPrefix != dp || !po.Record.Present || keep && len(po.Record.Entries) == 0 {
		return permit.Outcome{}, 0
	}
	self := permit.Object{Resource: k.Resource, Namespace: po.Namespace, Name: po.Name}
	if _, ok := w.pools.Get(self, po.ResourceVersion); ok {
		return permit.Outcome{}, 0 // already released; the cache has not caught up
	}
	write := po.Release()
	said := "managed entries and record removed"
	if keep {
		write.Record, said = []string{}, "managed entries removed, record emptied"
	}
	if w.Shadow(poolChanges(self, k, po, write)...) {
		return permit.Outcome{}, 0
	}
	if ok, wait := w.PermitQuietly(self); !ok {
		return permit.Outcome{}, wait
	}
	if err := patchPool(ctx, w.Client, k, po, write, true, nil); err != nil {
		return w.failed(self, u, dp, fmt.Sprintf("%s %q", k.Name, po.Key()), err), 0
	}
	w.Events.Forget("refused/" + self.String())
	w.pools.Put(self, po.ResourceVersion, po.After(write))
	permit.Counted(k.Resource)
	_, removed := changed(po.Entries, write.Entries)
	w.Log.Info(fmt.Sprintf("%s %s released", k.Name, po.Key()), "removed", removed, "why", why)
	w.Events.Event(u, "PoolReleased", why+": "+said)
	return permit.Outcome{}, 0
}

// ReleaseAll releases everything written for the DynamicPrefix dp, which was
// deleted: our entries in every pool naming it, our annotations on every
// Service naming it, and its CiliumBGPAdvertisements (their store nil when
// not served). The user's entries stay; each released object gets one event.
func (w *Writer) ReleaseAll(ctx context.Context, pools []backends.Cached, services cache.Indexer, adverts backends.Advertisements, gvr schema.GroupVersionResource, dp string) permit.Outcomes {
	var out permit.Outcomes
	var wait time.Duration
	for _, c := range pools {
		for _, p := range c.Following(dp) {
			r, again := w.ReleasePool(ctx, c, p.Key(), dp)
			out, wait = append(out, r), max(wait, again)
		}
	}
	for _, m := range backends.ServicesFollowing(services, dp) {
		r, again := w.ReleaseService(ctx, pools, services, m.Namespace, m.Name, dp)
		out, wait = append(out, r), max(wait, again)
	}
	if adverts.Store != nil {
		out = append(out, w.deleteAdvertisements(ctx, adverts, gvr, dp, nil)...)
	}
	if wait > 0 {
		w.Requeue(dp, wait)
		// Not released yet: what waits on the release (a finalizer) waits too.
		out = append(out, permit.Final(fmt.Errorf("releasing what DynamicPrefix %s wrote: %w (next permit in %s)", dp, model.ErrBudgetExceeded, wait.Round(time.Second))))
	}
	return out
}

// changed lists the entries added to and removed from a pool, canonical.
func changed(from, to []string) (added, removed []string) {
	in := func(e string, list []string) bool {
		return slices.ContainsFunc(list, func(x string) bool { return holdings.Canonical(x) == holdings.Canonical(e) })
	}
	for _, e := range to {
		if !in(e, from) {
			added = append(added, holdings.Canonical(e))
		}
	}
	for _, e := range from {
		if !in(e, to) {
			removed = append(removed, holdings.Canonical(e))
		}
	}
	return added, removed
}

// poolChanges are the entries and record a pool write changes, each from what
// is live (whoever wrote it) to what would be written; a record it cannot
// read says so.
func poolChanges(o permit.Object, k *backends.Kind, po backends.Object, write holdings.Write) []permit.Change {
	field := k.Top
	if field == "" {
		field = "spec"
	}
	var cs []permit.Change
	if !write.Kept {
		cs = append(cs, permit.Change{Object: o.String(), Field: field + " entries", From: joined(po.Entries), To: joined(write.Entries)})
	}
	to := write.Value
	if po.RecordFrom != k.RecordKey && po.Record.Present {
		cs = append(cs, permit.Change{Object: o.String(), Field: "metadata.annotations." + po.RecordFrom, From: po.RecordValue})
		po.RecordValue = ""
	}
	from := po.RecordValue
	if len(po.Record.Unreadable) > 0 {
		from += " (not understood: " + strings.Join(po.Record.Unreadable, ", ") + ")"
	}
	if from != to {
		cs = append(cs, permit.Change{Object: o.String(), Field: "metadata.annotations." + k.RecordKey, From: from, To: to})
	}
	return cs
}

// patchPool makes the write: its entries and the ownership record (removed
// when the write's record is nil; legacy record keys are removed either way) with a merge patch of only those
// fields, conditional on the resource version the entries were computed from:
// a concurrent edit by someone else is a conflict to retry, never overwritten.
//
// A kind that places its entries in the live object (Kind.Place) gets it,
// with the entries we owned before and the record to write. Its cache keeps
// only its entries (Kind.Kept), so the object is read from the API server
// here, at the version the entries were computed from: a write is rare (one
// per renumbering), a cached copy of every follower whole is not.
func patchPool(ctx context.Context, client dynamic.Interface, k *backends.Kind, o backends.Object, write holdings.Write, release bool, dryRun []string) error {
	var res dynamic.ResourceInterface = client.Resource(k.GVR)
	if k.Namespaced {
		res = client.Resource(k.GVR).Namespace(o.Namespace)
	}
	var spec, others map[string]any
	var err error
	if k.Place != nil {
		var live *unstructured.Unstructured
		if live, err = res.Get(ctx, o.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("reading %s %q: %w", k.Name, o.Key(), err)
		}
		if v := live.GetResourceVersion(); v != o.ResourceVersion {
			return apierrors.NewConflict(k.GVR.GroupResource(), o.Name, fmt.Errorf("version %s, the cache's %s", v, o.ResourceVersion))
		}
		spec, err = k.Place(live, write.Owned, write.Record, release)
		if err == nil && k.Annotate != nil {
			others = k.Annotate(live, write.Owned, write.Record, release)
		}
	} else {
		spec, err = k.Spec(o.Slot, write.Entries)
	}
	if err != nil {
		return err
	}
	top := k.Top
	if top == "" {
		top = "spec"
	}
	var rec any
	if write.Record != nil {
		rec = write.Value
	}
	annotations := map[string]any{k.RecordKey: rec}
	for key, v := range others {
		annotations[key] = v
	}
	for _, legacy := range k.LegacyRecordKeys {
		annotations[legacy] = nil
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": o.ResourceVersion, "annotations": annotations},
		top:        spec,
	})
	if err != nil {
		return err
	}
	if _, err := res.Patch(ctx, o.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "renumber-writer", DryRun: dryRun}); err != nil {
		return fmt.Errorf("patching %s %q: %w", k.Name, o.Key(), err)
	}
	return nil
}

// Admitted asks the API server whether it admits the first pool write d
// asks for, with a dry run of it (dryRun=All: nothing is stored). Called after
// a status naming a new prefix was written and seen by the writer's cache:
// the admission policy judges pool writes by the status it reads from a cache
// of its own, which lags the writer's under load, and a refused pool write
// would be a PoolError in the status and two more status writes. false: the
// dry run was refused by the admission policy (Forbidden); the caller looks
// again later, it never waits here. Nothing to write, a dry run the breaker
// refuses (Gate.DryRun), or any other answer: true, the writes go ahead
// and report what they meet. A kind that claims addresses (Gateways) is never
// the one asked, as Services are not: the policy refuses every address to
// one in a namespace the DynamicPrefix does not let follow, which is no news
// of the status.
func (w *Writer) Admitted(ctx context.Context, pools []backends.Cached, m model.Model, d decide.Decision) bool {
	for p := range poolsFollowing(pools, m.Name) {
		if p.Err != nil || p.Kind.Claims {
			continue
		}
		pl, err := w.plan(p.Kind, p.Object, m, d)
		if err != nil || pl.write.Holds {
			continue
		}
		if !w.DryRun(pl.self, m.Name) {
			return true
		}
		err = patchPool(ctx, w.Client, p.Kind, pl.po, pl.write, false, []string{metav1.DryRunAll})
		return !apierrors.IsForbidden(err)
	}
	return true
}
