package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/aggregate"
	"github.com/renumber/renumber/internal/writer/backend"
	"github.com/renumber/renumber/internal/writer/budget"
	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/pool"
	"github.com/renumber/renumber/internal/writer/spec"
	"github.com/renumber/renumber/internal/writer/status"
)

func (r *Reconciler) syncDynamicPrefix(ctx context.Context, name string) error {
	obj, exists, err := r.dps.store().GetByKey(name)
	if err != nil {
		return err
	}
	if !exists {
		r.forget("dp/" + name)
		return nil // pools that still name it are left as they are
	}
	u := obj.(*unstructured.Unstructured)
	dp, err := dynamicprefix.FromUnstructured(u)
	if err != nil {
		r.announce("dp/"+name, u, true, "InvalidObject", err.Error())
		return nil // not retryable: a fix of the object brings a new event
	}
	if w, ok := r.remembered("dp/"+name, u.GetResourceVersion()); ok {
		dp.Status = w.(dynamicprefix.Status)
	}
	m := spec.Parse(name, dp.Spec)
	now := r.clock.Now()
	reports, lapse := r.reports(now)
	d := aggregate.Decide(m, dp.Status, reports, now)
	if !lapse.IsZero() && (d.Wake.IsZero() || lapse.Before(d.Wake)) {
		d.Wake = lapse
	}
	for _, rej := range d.Rejected {
		r.announce("reject/"+name+"/"+rej.Prefix.String(), u, true, "PrefixRejected",
			fmt.Sprintf("%s reported by %d node(s) is not adopted: %s", rej.Prefix, rej.Nodes, rej.Reason))
	}

	var problems status.Problems
	if d.Current.IsValid() {
		problems.Spec = m.Check(d.Current)
	} else {
		problems.Spec = m.Err
	}
	var poolErrs []error
	if d.Current.IsValid() && problems.Spec == nil {
		for _, p := range r.backends() {
			for _, o := range p.w.store().List() {
				pu := o.(*unstructured.Unstructured)
				po, ours, err := p.kind.Decode(pu)
				if !ours || po.Follow.DynamicPrefix != name {
					continue
				}
				if err == nil {
					err = r.syncPool(ctx, p.kind, pu, po, dp, m, d)
				}
				if err != nil {
					if ctx.Err() != nil {
						return err
					}
					poolErrs = append(poolErrs, err)
				}
			}
		}
		poolErrs = append(poolErrs, r.syncServices(ctx, dp, m, d)...)
		problems.BGP, problems.BGPErr = r.syncBGP(ctx, u, m)
	}
	problems.Pools = errors.Join(poolErrs...)
	if problems.Spec != nil {
		r.announce("dp/"+name, u, true, "InvalidSpec", problems.Spec.Error())
	}

	st := status.Render(dp, m, d, problems, now)
	if status.Equal(st, dp.Status) {
		r.calm("dynamicprefixes/"+name, name)
	} else {
		if err := r.permit("dynamicprefixes/"+name, u, name); err != nil {
			return nil // requeued for when a permit is back
		}
		if err := r.patchStatus(ctx, u, st); err != nil {
			return err
		}
		r.remember("dp/"+name, u.GetResourceVersion(), st)
		metricWrites.With("dynamicprefixes/status").Inc()
	}
	if d.Changed && d.Current.IsValid() {
		prev := dp.Status.CurrentPrefix
		if prev == "" {
			prev = "none"
		}
		r.log.Info(fmt.Sprintf("%s: prefix %s -> %s", name, prev, d.Current), "nodes", d.Reporting, "pooled", d.Pooled)
		r.announce("dp/"+name+"/prefix", u, false, "PrefixChanged", fmt.Sprintf("following %s (was %s)", d.Current, prev))
	}
	if !d.Wake.IsZero() {
		r.queue.AddAfter("dp/"+name, max(d.Wake.Sub(now), 0))
	}
	// Pool errors are the user's to fix (condition and event), and throttled
	// writes are already requeued: retrying with backoff would only repeat them.
	// Conflicts and API errors are retried.
	var retry []error
	for _, e := range append(poolErrs, problems.BGPErr) {
		if e == nil {
			continue
		}
		if !errors.Is(e, spec.ErrInvalid) && !errors.Is(e, budget.ErrExceeded) {
			retry = append(retry, e)
		}
	}
	return errors.Join(retry...)
}

func (r *Reconciler) syncPool(ctx context.Context, k *backend.Kind, u *unstructured.Unstructured, po backend.Object, dp *dynamicprefix.DynamicPrefix, m spec.Model, d aggregate.Decision) error {
	key := k.Resource + "/" + po.Key()
	if w, ok := r.remembered(key, po.ResourceVersion); ok {
		wr := w.([2][]string)
		po.Entries, po.Record, po.HasRecord = wr[0], wr[1], len(wr[1]) > 0
	}
	desired, err := pool.Desired(m, po.Follow, d.Pooled, k.CIDROnly)
	if err != nil {
		err = fmt.Errorf("%s %q: %w", k.Name, po.Key(), err)
		r.announce("pool/"+key, u, true, "InvalidPoolReference", err.Error())
		return err
	}
	entries, record := pool.Merge(po.Entries, po.Record, desired)
	if pool.Same(entries, po.Entries) && slices.Equal(record, po.Record) && po.HasRecord == (len(record) > 0) {
		r.forget("pool/" + key)
		r.calm(key, dp.Name)
		return nil
	}
	if err := r.permit(key, u, dp.Name); err != nil {
		return err
	}
	if err := k.Patch(ctx, r.client, po, entries, record); err != nil {
		return err
	}
	r.remember(key, po.ResourceVersion, [2][]string{entries, record})
	metricWrites.With(k.Resource).Inc()
	removed := difference(po.Record, record)
	note := fmt.Sprintf("managed entries now %s", strings.Join(record, ", "))
	if len(removed) > 0 {
		note += fmt.Sprintf("; removed %s", strings.Join(removed, ", "))
	}
	r.log.Info(fmt.Sprintf("%s %s updated", k.Name, po.Key()), "managed", record, "removed", removed)
	r.recorder.Event(u, false, "PoolUpdated", note)
	r.forget("pool/" + key)
	return nil
}

// release removes our entries and record from an object whose
// dynamic-prefix.io/name annotation was removed; nothing else is touched.
func (r *Reconciler) release(ctx context.Context, p *pooled, name string) error {
	k := p.kind
	obj, exists, err := p.w.store().GetByKey(name)
	if err != nil || !exists {
		return err
	}
	u := obj.(*unstructured.Unstructured)
	po, ours, err := k.Decode(u)
	if err != nil || !ours || po.Follow.DynamicPrefix != "" {
		return err
	}
	key := k.Resource + "/" + po.Key()
	if _, ok := r.remembered(key, po.ResourceVersion); ok {
		return nil // already released; the cache has not caught up
	}
	entries, _ := pool.Merge(po.Entries, po.Record, nil)
	if ok, wait := r.budget.Take(key, r.clock.Now()); !ok {
		metricRefused.With(k.Resource).Inc()
		r.queue.AddAfter(releaseKey(k, name), wait)
		return nil
	}
	if err := k.Patch(ctx, r.client, po, entries, nil); err != nil {
		return err
	}
	r.remember(key, po.ResourceVersion, [2][]string{entries, nil})
	metricWrites.With(k.Resource).Inc()
	r.log.Info(fmt.Sprintf("%s %s released", k.Name, po.Key()), "removed", po.Record)
	r.recorder.Event(u, false, "PoolReleased", "dynamic-prefix.io/name removed: managed entries and record removed")
	return nil
}

func (r *Reconciler) patchStatus(ctx context.Context, u *unstructured.Unstructured, st dynamicprefix.Status) error {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": u.GetResourceVersion()},
		"status":   st,
	})
	if err != nil {
		return err
	}
	_, err = r.client.Resource(dynamicprefix.GVR).Patch(ctx, u.GetName(), types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: "renumber-writer"}, "status")
	if err != nil {
		return fmt.Errorf("patching status of DynamicPrefix %q: %w", u.GetName(), err)
	}
	return nil
}

func difference(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
