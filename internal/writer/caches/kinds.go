package caches

import (
	"context"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/backoff"
	"github.com/renumber/renumber/internal/writer/backend"
	"github.com/renumber/renumber/internal/writer/cilium"
	"github.com/renumber/renumber/internal/writer/informer"
)

// Served is what the API server serves of the kinds the writer writes.
type Served struct {
	Pools  []*backend.Kind
	BGP    schema.GroupVersionResource // CiliumBGPAdvertisement; empty when not served
	Calico schema.GroupVersionResource // Calico's IPPool; empty when not served
}

// Discover asks the API server what it serves now.
type Discover func() (Served, error)

// pooled is one pool kind and the informer over its objects.
type pooled struct {
	kind *backend.Kind
	w    *informer.Watched
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// followed returns the pool kinds being followed now.
func (c *Caches) followed() []*pooled {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.pools)
}

// Kinds returns the names of the pool kinds followed now.
func (c *Caches) Kinds() []string {
	var out []string
	for _, p := range c.followed() {
		out = append(out, p.kind.Name)
	}
	return out
}

func (c *Caches) newPooled(k *backend.Kind) *pooled {
	w := informer.NewWatched(k.Resource, k.GVR, func() cache.SharedIndexInformer {
		inf := informer.Dynamic(c.dyn, k.GVR, k.Scope())
		changed := func(o any) {
			if u, ok := o.(*unstructured.Unstructured); ok {
				c.h.PoolChanged(k, u)
			}
		}
		_, _ = inf.AddEventHandler(onChange(changed, false))
		return inf
	})
	w.Scope = k.Scope()
	return &pooled{kind: k, w: w}
}

// watchCRDs signals a rediscovery when a CustomResourceDefinition of a backend
// group is added, changed or removed (metadata only; the initial list is not a
// change).
func (c *Caches) watchCRDs() *informer.Watched {
	ours := func(o any) bool {
		name := informer.Name(o)
		for _, g := range c.cfg.BackendGroups {
			if strings.HasSuffix(name, "."+g) {
				return true
			}
		}
		return false
	}
	signal := func(o any) {
		if ours(o) {
			select {
			case c.rediscover <- struct{}{}:
			default:
			}
		}
	}
	return informer.NewWatched("customresourcedefinitions", crdGVR, func() cache.SharedIndexInformer {
		inf := informer.Metadata(c.meta, crdGVR)
		_ = inf.SetTransform(keepNameOnly)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(o any, initial bool) {
				if !initial {
					signal(o)
				}
			},
			UpdateFunc: func(old, new any) {
				if informer.Version(old) != informer.Version(new) {
					signal(new)
				}
			},
			DeleteFunc: signal,
		})
		return inf
	})
}

// followKinds picks up pool kinds installed (or removed) while running, on
// every replica, so a standby's caches are as warm as the leader's. The API
// server's discovery lags a new CRD by a moment, so a signal is followed by a
// few looks; a discovery that fails is retried with backoff until it answers.
func (c *Caches) followKinds(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.rediscover:
		}
		looks := 0
		b := backoff.New(time.Second, 30*time.Second)
		for looks < 10 {
			wait := time.Second
			changed, err := c.updateKinds(ctx)
			if err != nil {
				wait = b.Next()
				c.log.Debug("pool kind discovery failed; retrying", "err", err, "in", wait)
			} else {
				looks++
				b.Reset()
			}
			if changed || !backoff.Sleep(ctx, c.clock, wait) {
				break
			}
		}
	}
}

// updateKinds compares the served pool kinds with the followed ones, starts
// informers for new kinds (waiting until they are listed) and stops removed ones.
// It reports whether anything changed; on a discovery error nothing changes.
func (c *Caches) updateKinds(ctx context.Context) (bool, error) {
	s, err := c.discover()
	if err != nil {
		return false, err
	}
	served := s.Pools
	current := c.followed()
	changed := false
	for _, p := range current {
		if !slices.ContainsFunc(served, func(k *backend.Kind) bool { return k.GVR == p.kind.GVR }) {
			p.w.Halt()
			c.mu.Lock()
			c.pools = slices.DeleteFunc(c.pools, func(q *pooled) bool { return q == p })
			c.mu.Unlock()
			c.log.Info("pool kind no longer served; stopped following it", "kind", p.kind.Name, "version", p.kind.GVR.Version)
			changed = true
		}
	}
	for _, k := range served {
		if slices.ContainsFunc(current, func(p *pooled) bool { return p.kind.GVR == k.GVR }) {
			continue
		}
		p := c.newPooled(k)
		if !p.w.RunSynced(ctx) {
			continue // the next signal tries again
		}
		c.mu.Lock()
		c.pools = append(c.pools, p)
		c.mu.Unlock()
		c.log.Info("pool kind served; following it", "kind", k.Name, "version", k.GVR.Version)
		// Its objects were announced while it was listed, before passes could
		// see the kind: announce them again now that they can.
		for _, o := range p.w.Store().List() {
			c.h.PoolChanged(k, o.(*unstructured.Unstructured))
		}
		changed = true
	}
	bgp := c.update(ctx, &c.bgp, s.BGP)
	return c.update(ctx, &c.calico, s.Calico) || bgp || changed, nil
}

// optional is the informer over a resource the API server may serve or not.
type optional struct {
	name  string // the kind, for logs
	watch func(schema.GroupVersionResource) *informer.Watched
	w     *informer.Watched // nil while not served
	gvr   schema.GroupVersionResource
}

// update starts or stops following o's resource, served now as gvr (empty:
// not served), and reports whether anything changed.
func (c *Caches) update(ctx context.Context, o *optional, gvr schema.GroupVersionResource) bool {
	w, current := c.current(o)
	if current == gvr {
		return false
	}
	if w != nil {
		w.Halt()
		c.mu.Lock()
		o.w, o.gvr = nil, schema.GroupVersionResource{}
		c.mu.Unlock()
		c.log.Info(o.name+" no longer served; stopped following it", "version", current.Version)
	}
	if !gvr.Empty() {
		w := o.watch(gvr)
		if !w.RunSynced(ctx) {
			return true // the next signal tries again
		}
		c.mu.Lock()
		o.w, o.gvr = w, gvr
		c.mu.Unlock()
		c.log.Info(o.name+" served; following it", "version", gvr.Version)
	}
	c.h.KindsChanged() // what asks for it can be served now (or no longer)
	return true
}

// current returns o's informer and resource, nil when not served.
func (c *Caches) current(o *optional) (*informer.Watched, schema.GroupVersionResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return o.w, o.gvr
}

// advertisements returns the CiliumBGPAdvertisement informer and resource.
func (c *Caches) advertisements() (*informer.Watched, schema.GroupVersionResource) {
	return c.current(&c.bgp)
}

// watchCalico follows Calico's IPPools: the annotated ones and our siblings
// matter; a change of either queues the DynamicPrefix it names.
func (c *Caches) watchCalico(gvr schema.GroupVersionResource) *informer.Watched {
	return informer.NewWatched("ippools", gvr, func() cache.SharedIndexInformer {
		inf := informer.Dynamic(c.dyn, gvr, informer.Scope{})
		changed := func(o any) {
			if u, ok := informer.Unwrap(o).(*unstructured.Unstructured); ok {
				c.h.CalicoPoolChanged(u)
			}
		}
		_, _ = inf.AddEventHandler(onChange(changed, true))
		return inf
	})
}

// onChange calls changed for an added object, for both sides of an update
// that changed its version (it may have followed another DynamicPrefix), and,
// with deletes, for a deleted one.
func onChange(changed func(o any), deletes bool) cache.ResourceEventHandlerFuncs {
	h := cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, new any) {
			if informer.Version(old) != informer.Version(new) {
				changed(old)
				changed(new)
			}
		},
	}
	if deletes {
		h.DeleteFunc = changed
	}
	return h
}

func (c *Caches) watchBGP(gvr schema.GroupVersionResource) *informer.Watched {
	return informer.NewWatched("ciliumbgpadvertisements", gvr, func() cache.SharedIndexInformer {
		inf := informer.Dynamic(c.dyn, gvr, informer.Scope{})
		changed := func(o any) {
			if u, ok := informer.Unwrap(o).(*unstructured.Unstructured); ok && u.GetLabels()[cilium.LabelManagedBy] == cilium.ManagedBy {
				c.h.AdvertisementChanged(u)
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    changed,
			UpdateFunc: func(_, n any) { changed(n) },
			DeleteFunc: changed,
		})
		return inf
	})
}

// keepNameOnly strips cached CRDs down to name and version.
func keepNameOnly(o any) (any, error) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return o, nil
	}
	return informer.Bare(m), nil
}
