package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
)

// Advertisements makes one CiliumBGPAdvertisement per advertised subnet that a pool
// uses, patches it only when its rendered spec changes, and deletes the ones no
// subnet asks for any more. It returns subnet -> advertisement name.
// The cache of advertisements is nil (and gvr empty) when the API server
// does not serve them; pools are the pool caches, where a subnet's
// CiliumLoadBalancerIPPool gives the selector.
func (w *Writer) Advertisements(ctx context.Context, bgp backends.Advertisements, gvr schema.GroupVersionResource, pools []backends.Cached, u *unstructured.Unstructured, m model.Model) (map[string]string, permit.Outcomes) {
	if bgp.Store == nil {
		for _, s := range m.Subnets {
			if s.Advertise {
				return nil, permit.Outcomes{permit.Final(fmt.Errorf("%w: subnet %s asks for BGP, but cilium.io/v2 CiliumBGPAdvertisement is not served", model.ErrInvalid, s.Name))}
			}
		}
		return nil, nil
	}
	names := map[string]string{}
	want := map[string]bool{}
	var out permit.Outcomes
	for _, s := range m.Subnets {
		if !s.Advertise {
			continue
		}
		selector, found, err := poolSelector(pools, m.Name, s.Name)
		if err != nil {
			for _, a := range bgp.MadeFor(m.Name) {
				if a.Subnet == s.Name {
					want[a.Live.GetName()] = true // left as it is until the pools agree
				}
			}
			out = append(out, permit.Final(err))
			continue
		}
		if !found {
			out = append(out, permit.Final(fmt.Errorf("%w: no CiliumLoadBalancerIPPool uses subnet %q: nothing to advertise", model.ErrInvalid, s.Name)))
			continue
		}
		a, err := backends.RenderAdvertisement(m.Name, s, selector)
		if err != nil {
			out = append(out, permit.Final(fmt.Errorf("%w: %w", model.ErrInvalid, err)))
			continue
		}
		var live *unstructured.Unstructured
		cached, found := bgp.Get(a.Name)
		if !found {
			// The existing operator's: written in place, no second one.
			if cached, found = bgp.Get(backends.OperatorAdvertisementName(m.Name, s.Name)); found && cached.Adopted(m.Name, s.Name) {
				a = backends.Adopt(a, cached)
			} else {
				found = false
			}
		}
		if found {
			live = cached.Live
		}
		want[a.Name] = true
		names[s.Name] = a.Name
		self := permit.Object{Resource: "ciliumbgpadvertisements", Name: a.Name}
		if _, ok := w.adverts.Get(self, ""); ok && live == nil {
			continue // created; the cache has not shown it yet
		}
		if live != nil {
			if last, ok := w.adverts.Get(self, live.GetResourceVersion()); ok && last == a.Name {
				continue
			}
			if backends.SameAdvertisement(cached, a) {
				w.Calm(self, m.Name)
				continue
			}
		}
		if live == nil && w.Shadow(permit.Created(self, a.Spec)) {
			continue
		}
		if live != nil && w.Shadow(permit.Updated(self, live.Object["spec"], a.Spec)) {
			continue
		}
		if err := w.Permit(self, u, m.Name); err != nil {
			out = append(out, permit.Final(err))
			continue
		}
		if err := applyAdvertisement(ctx, w.Client, gvr, u, live, a); err != nil {
			w.Unwritten(self, err)
			out = append(out, permit.Transient(err))
			continue
		}
		base := ""
		if live != nil {
			base = live.GetResourceVersion()
		}
		w.adverts.Put(self, base, a.Name)
		permit.Counted("ciliumbgpadvertisements")
		w.Log.Info("CiliumBGPAdvertisement "+a.Name+" applied", "subnet", s.Name)
	}
	return names, append(out, w.deleteAdvertisements(ctx, bgp, gvr, m.Name, want)...)
}

// deleteAdvertisements deletes the CiliumBGPAdvertisements we (or the
// existing operator) made for dp that keep does not name.
func (w *Writer) deleteAdvertisements(ctx context.Context, bgp backends.Advertisements, gvr schema.GroupVersionResource, dp string, keep map[string]bool) permit.Outcomes {
	var out permit.Outcomes
	for _, a := range bgp.MadeFor(dp) {
		live := a.Live
		if !a.Ours() && !a.Adopted(dp, a.Subnet) || keep[live.GetName()] {
			continue
		}
		self := permit.Object{Resource: "ciliumbgpadvertisements", Name: live.GetName()}
		if _, ok := w.deleted.Get(self, live.GetResourceVersion()); ok {
			continue // deleted; the cache has not caught up
		}
		if w.Shadow(permit.Removed(self)) {
			continue
		}
		if err := w.Client.Resource(gvr).Delete(ctx, live.GetName(), metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: ptr(live.GetResourceVersion())}}); err != nil {
			out = append(out, permit.Transient(fmt.Errorf("deleting orphaned CiliumBGPAdvertisement %q: %w", live.GetName(), err)))
			continue
		}
		w.deleted.Put(self, live.GetResourceVersion(), struct{}{})
		permit.Counted("ciliumbgpadvertisements")
		w.Log.Info("CiliumBGPAdvertisement " + live.GetName() + " deleted (no subnet advertises it)")
		w.Events.Event(live, "AdvertisementDeleted", "no subnet of DynamicPrefix "+dp+" advertises it any more")
	}
	return out
}

// poolSelector finds the serviceSelector of the pools using dp's subnet. The
// subnet's one advertisement selects their Services, so they must share it:
// two that differ are an error naming both (the advertisement stays as it
// was), where rendering the first one's had the write refused at every pass
// (renumber-writer-advertised-services holds it to each) and the second
// pool's Services went unannounced.
func poolSelector(pools []backends.Cached, dp, subnet string) (map[string]any, bool, error) {
	var first *backends.Pool
	for _, c := range pools {
		if c.Kind.Resource != backends.PoolResource {
			continue
		}
		for _, p := range c.Following(dp) {
			switch {
			case p.Follow.Subnet != subnet:
			case first == nil:
				first = p
			case !reflect.DeepEqual(first.Selector, p.Selector):
				return nil, true, fmt.Errorf("%w: CiliumLoadBalancerIPPools %s and %s both use subnet %q with different serviceSelectors: its one CiliumBGPAdvertisement cannot select the Services of each alone; give them one serviceSelector",
					model.ErrInvalid, first.Key(), p.Key(), subnet)
			}
		}
	}
	if first == nil {
		return nil, false, nil
	}
	return first.Selector, true, nil
}

func ptr[T any](v T) *T { return &v }

// applyAdvertisement creates a, or merge-patches its spec and labels, owned by
// the DynamicPrefix so deleting it removes the advertisement.
func applyAdvertisement(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, owner *unstructured.Unstructured, live *unstructured.Unstructured, a backends.Advertisement) error {
	res := client.Resource(gvr)
	if live == nil {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
			"metadata": map[string]any{"name": a.Name},
			"spec":     a.Spec,
		}}
		u.SetLabels(a.Labels)
		u.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(),
		}})
		if _, err := res.Create(ctx, u, metav1.CreateOptions{FieldManager: "renumber-writer"}); err != nil {
			return fmt.Errorf("creating CiliumBGPAdvertisement %q: %w", a.Name, err)
		}
		return nil
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": live.GetResourceVersion(), "labels": a.Labels},
		"spec":     a.Spec,
	})
	if err != nil {
		return err
	}
	if _, err := res.Patch(ctx, a.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "renumber-writer"}); err != nil {
		return fmt.Errorf("patching CiliumBGPAdvertisement %q: %w", a.Name, err)
	}
	return nil
}
