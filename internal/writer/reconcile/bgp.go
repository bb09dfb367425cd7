package reconcile

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/cilium"
	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/spec"
)

// bgpWatch returns the CiliumBGPAdvertisement informer and resource, nil when
// the API server does not serve it.
func (r *Reconciler) bgpWatch() (*watched, schema.GroupVersionResource) {
	r.bmu.Lock()
	defer r.bmu.Unlock()
	return r.bgp, r.bgpGVR
}

func (r *Reconciler) watchBGP(gvr schema.GroupVersionResource) *watched {
	return newWatched("ciliumbgpadvertisements", gvr, func() cache.SharedIndexInformer {
		inf := dynamicInformer(r.client, gvr)
		changed := func(o any) {
			if u, ok := o.(*unstructured.Unstructured); ok && u.GetLabels()[cilium.LabelManagedBy] == cilium.ManagedBy {
				r.enqueue(u.GetLabels()[dynamicprefix.AnnotationName], 0)
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    changed,
			UpdateFunc: func(_, n any) { changed(n) },
			DeleteFunc: func(o any) {
				if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				changed(o)
			},
		})
		return inf
	})
}

// syncBGP makes one CiliumBGPAdvertisement per advertised subnet that a pool
// uses, patches it only when its rendered spec changes, and deletes the ones no
// subnet asks for any more. It returns subnet -> advertisement name.
func (r *Reconciler) syncBGP(ctx context.Context, u *unstructured.Unstructured, m spec.Model) (map[string]string, error) {
	bgp, gvr := r.bgpWatch()
	if bgp == nil {
		for _, s := range m.Subnets {
			if s.Advertise {
				return nil, fmt.Errorf("%w: subnet %s asks for BGP, but cilium.io/v2 CiliumBGPAdvertisement is not served", spec.ErrInvalid, s.Name)
			}
		}
		return nil, nil
	}
	names := map[string]string{}
	want := map[string]bool{}
	var errs []error
	for _, s := range m.Subnets {
		if !s.Advertise {
			continue
		}
		selector, found := r.poolSelector(m.Name, s.Name)
		if !found {
			errs = append(errs, fmt.Errorf("%w: no CiliumLoadBalancerIPPool uses subnet %q: nothing to advertise", spec.ErrInvalid, s.Name))
			continue
		}
		a, err := cilium.RenderAdvertisement(m.Name, s, selector)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %v", spec.ErrInvalid, err))
			continue
		}
		want[a.Name] = true
		names[s.Name] = a.Name
		var live *unstructured.Unstructured
		if o, ok, _ := bgp.store().GetByKey(a.Name); ok {
			live = o.(*unstructured.Unstructured)
		}
		key := "ciliumbgpadvertisements/" + a.Name
		if _, ok := r.remembered(key, ""); ok && live == nil {
			continue // created; the cache has not shown it yet
		}
		if live != nil {
			if w, ok := r.remembered(key, live.GetResourceVersion()); ok && w.(string) == a.Name {
				continue
			}
			if cilium.SameAdvertisement(live, a) {
				r.calm(key, m.Name)
				continue
			}
		}
		if err := r.permit(key, u, m.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := cilium.ApplyAdvertisement(ctx, r.client, gvr, u, live, a); err != nil {
			errs = append(errs, err)
			continue
		}
		base := ""
		if live != nil {
			base = live.GetResourceVersion()
		}
		r.remember(key, base, a.Name)
		metricWrites.With("ciliumbgpadvertisements").Inc()
		r.log.Info("CiliumBGPAdvertisement "+a.Name+" applied", "subnet", s.Name)
	}
	for _, o := range bgp.store().List() {
		live := o.(*unstructured.Unstructured)
		l := live.GetLabels()
		if l[cilium.LabelManagedBy] != cilium.ManagedBy || l[dynamicprefix.AnnotationName] != m.Name || want[live.GetName()] {
			continue
		}
		if err := r.client.Resource(gvr).Delete(ctx, live.GetName(), metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: ptr(live.GetResourceVersion())}}); err != nil {
			errs = append(errs, fmt.Errorf("deleting orphaned CiliumBGPAdvertisement %q: %w", live.GetName(), err))
			continue
		}
		metricWrites.With("ciliumbgpadvertisements").Inc()
		r.log.Info("CiliumBGPAdvertisement " + live.GetName() + " deleted (no subnet advertises it)")
	}
	return names, errors.Join(errs...)
}

// poolSelector finds the serviceSelector of the pool using dp's subnet.
func (r *Reconciler) poolSelector(dp, subnet string) (map[string]any, bool) {
	if p := r.backend("ciliumloadbalancerippools"); p != nil {
		for _, o := range p.w.store().List() {
			u := o.(*unstructured.Unstructured)
			a := u.GetAnnotations()
			if a[dynamicprefix.AnnotationName] == dp && a[dynamicprefix.AnnotationSubnet] == subnet {
				return cilium.Selector(u), true
			}
		}
	}
	return nil, false
}

func ptr[T any](v T) *T { return &v }
