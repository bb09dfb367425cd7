package reconcile

import (
	"context"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/backend"
)

// Served is what the API server serves of the kinds the writer writes.
type Served struct {
	Pools []*backend.Kind
	BGP   schema.GroupVersionResource // CiliumBGPAdvertisement; empty when not served
}

// Discover asks the API server what it serves now.
type Discover func() (Served, error)

// pooled is one pool kind and the informer over its objects.
type pooled struct {
	kind *backend.Kind
	w    *watched
	stop context.CancelFunc // set once running
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// backends returns the pool kinds being followed now.
func (r *Reconciler) backends() []*pooled {
	r.bmu.Lock()
	defer r.bmu.Unlock()
	return slices.Clone(r.pools)
}

func (r *Reconciler) backend(resource string) *pooled {
	for _, p := range r.backends() {
		if p.kind.Resource == resource {
			return p
		}
	}
	return nil
}

func (r *Reconciler) newPooled(k *backend.Kind) *pooled {
	return &pooled{kind: k, w: newWatched(k.Resource, k.GVR, func() cache.SharedIndexInformer {
		inf := dynamicInformer(r.client, k.GVR)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { r.poolChanged(k, nil, o) },
			UpdateFunc: func(old, new any) {
				if old.(*unstructured.Unstructured).GetResourceVersion() != new.(*unstructured.Unstructured).GetResourceVersion() {
					r.poolChanged(k, old, new)
				}
			},
		})
		return inf
	})}
}

func (p *pooled) run(ctx context.Context) {
	ctx, p.stop = context.WithCancel(ctx)
	p.w.run(ctx)
}

// watchCRDs signals a rediscovery when a CustomResourceDefinition of a backend
// group is added, changed or removed (metadata only; the initial list is not a
// change).
func (r *Reconciler) watchCRDs() *watched {
	ours := func(o any) bool {
		if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		name := metaName(o)
		for _, g := range r.cfg.BackendGroups {
			if strings.HasSuffix(name, "."+g) {
				return true
			}
		}
		return false
	}
	signal := func(o any) {
		if ours(o) {
			select {
			case r.rediscover <- struct{}{}:
			default:
			}
		}
	}
	return newWatched("customresourcedefinitions", crdGVR, func() cache.SharedIndexInformer {
		inf := metadataInformer(r.meta, crdGVR)
		_ = inf.SetTransform(keepNameOnly)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(o any, initial bool) {
				if !initial {
					signal(o)
				}
			},
			UpdateFunc: func(old, new any) {
				if metaVersion(old) != metaVersion(new) {
					signal(new)
				}
			},
			DeleteFunc: signal,
		})
		return inf
	})
}

// followBackends picks up pool kinds installed (or removed) while running, on
// every replica, so a standby's caches are as warm as the leader's. The API
// server's discovery lags a new CRD by a moment, so a signal is followed by a
// few looks; a discovery that fails is retried with backoff until it answers.
func (r *Reconciler) followBackends(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.rediscover:
		}
		looks, wait := 0, time.Second
		for looks < 10 {
			changed, err := r.updateBackends(ctx)
			if err != nil {
				r.log.Debug("pool kind discovery failed; retrying", "err", err, "in", wait)
				wait = min(2*wait, 30*time.Second)
			} else {
				looks++
			}
			if changed || !sleep(ctx, r.clock, wait) {
				break
			}
		}
	}
}

func sleep(ctx context.Context, clk interface {
	After(time.Duration) <-chan time.Time
}, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-clk.After(d):
		return true
	}
}

// updateBackends compares the served pool kinds with the followed ones, starts
// informers for new kinds (waiting until they are listed) and stops removed ones.
// It reports whether anything changed; on a discovery error nothing changes.
func (r *Reconciler) updateBackends(ctx context.Context) (bool, error) {
	s, err := r.discover()
	if err != nil {
		return false, err
	}
	served := s.Pools
	current := r.backends()
	changed := false
	for _, p := range current {
		if !slices.ContainsFunc(served, func(k *backend.Kind) bool { return k.GVR == p.kind.GVR }) {
			p.stop()
			r.bmu.Lock()
			r.pools = slices.DeleteFunc(r.pools, func(q *pooled) bool { return q == p })
			r.bmu.Unlock()
			r.log.Info("pool kind no longer served; stopped following it", "kind", p.kind.Name, "version", p.kind.GVR.Version)
			changed = true
		}
	}
	for _, k := range served {
		if slices.ContainsFunc(current, func(p *pooled) bool { return p.kind.GVR == k.GVR }) {
			continue
		}
		p := r.newPooled(k)
		p.run(ctx)
		wait, cancel := context.WithTimeout(ctx, restartTimeout)
		ok := cache.WaitForCacheSync(wait.Done(), p.w.synced)
		cancel()
		if !ok {
			p.stop()
			continue // the next signal tries again
		}
		r.bmu.Lock()
		r.pools = append(r.pools, p)
		r.bmu.Unlock()
		r.log.Info("pool kind served; following it", "kind", k.Name, "version", k.GVR.Version)
		for _, o := range p.w.store().List() {
			r.poolChanged(k, nil, o)
		}
		changed = true
	}
	return r.updateBGP(ctx, s.BGP) || changed, nil
}

// updateBGP starts or stops following CiliumBGPAdvertisements.
func (r *Reconciler) updateBGP(ctx context.Context, gvr schema.GroupVersionResource) bool {
	w, current := r.bgpWatch()
	if current == gvr {
		return false
	}
	if w != nil {
		w.halt()
		r.bmu.Lock()
		r.bgp, r.bgpGVR = nil, schema.GroupVersionResource{}
		r.bmu.Unlock()
		r.log.Info("CiliumBGPAdvertisement no longer served; stopped following it", "version", current.Version)
	}
	if !gvr.Empty() {
		w := r.watchBGP(gvr)
		w.run(ctx)
		wait, cancel := context.WithTimeout(ctx, restartTimeout)
		ok := cache.WaitForCacheSync(wait.Done(), w.synced)
		cancel()
		if !ok {
			w.halt()
			return true // the next signal tries again
		}
		r.bmu.Lock()
		r.bgp, r.bgpGVR = w, gvr
		r.bmu.Unlock()
		r.log.Info("CiliumBGPAdvertisement served; following it", "version", gvr.Version)
	}
	r.enqueueAll(0) // subnets asking for BGP can be served now (or no longer)
	return true
}

// keepNameOnly strips cached CRDs down to name and version.
func keepNameOnly(o any) (any, error) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return o, nil
	}
	return bare(m), nil
}

// bare is m with only its identity: name, namespace, version, UID.
func bare(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	out.Name, out.Namespace, out.ResourceVersion, out.UID = m.Name, m.Namespace, m.ResourceVersion, m.UID
	return out
}

func metaName(o any) string {
	if m, err := meta.Accessor(o); err == nil {
		return m.GetName()
	}
	return ""
}

func metaVersion(o any) string {
	if m, err := meta.Accessor(o); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}
