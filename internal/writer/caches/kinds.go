// Followed follows the kinds the writer writes that the API server may
// serve or not, and that can come and go while it runs: the pool kinds
// (CiliumLoadBalancerIPPool, CiliumCIDRGroup, MetalLB's IPAddressPool, in the
// versions discovery finds), CiliumBGPAdvertisements and Calico IPPools. It
// asks discovery at start and again whenever a CustomResourceDefinition of a
// backend group changes, and starts or stops an informer per kind.

package caches

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/renumber/renumber/internal/writer/api"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/backoff"
	"github.com/renumber/renumber/internal/writer/backends"
)

// KindsHandler is told of changes to the objects of the kinds followed.
type KindsHandler interface {
	PoolChanged(p *backends.Pool)
	AdvertisementChanged(a *backends.CachedAdvertisement)
	// KindsChanged: CiliumBGPAdvertisement or Calico's IPPool became served,
	// or stopped being.
	KindsChanged()
	// CalicoPoolChanged: a Calico IPPool changed (p: as it was and as it is).
	CalicoPoolChanged(p *backends.IPPool)
}

// Followed are the informers over the kinds served now.
type Followed struct {
	groups   []string
	dyn      dynamic.Interface
	meta     metadata.Interface
	discover Discover
	clock    clock.Clock
	log      *slog.Logger
	h        KindsHandler
	// space is where a kind's cache keeps what a load balancer publishes
	// past the bound (Kind.SlimIn; Caches.Space).
	space func() []netip.Prefix

	crds *Watched // nil without backend groups

	mu          sync.Mutex
	pools       []*pooled     // the pool kinds followed now
	bgp, calico optional      // CiliumBGPAdvertisements, Calico IPPools
	rediscover  chan struct{} // a backend CRD changed
}

// NewFollowed asks discovery once (a failure is retried in the background once Run
// runs) and builds the informers for what is served. groups are the API
// groups of pool kinds: a CRD of one of them installed, changed or removed
// makes it look again. space is where the caches keep what a load balancer
// publishes past the bound (Caches.Space). Nothing runs before Run.
func NewFollowed(groups []string, dyn dynamic.Interface, meta metadata.Interface, discover Discover, space func() []netip.Prefix, clk clock.Clock, log *slog.Logger) *Followed {
	f := &Followed{groups: groups, dyn: dyn, meta: meta, discover: discover, space: space, clock: clk, log: log,
		rediscover: make(chan struct{}, 1)}
	served, err := discover()
	if err != nil {
		log.Warn("discovery failed; retrying in the background", "err", err)
		f.rediscover <- struct{}{}
	}
	for _, k := range served.Pools {
		f.pools = append(f.pools, f.newPooled(k))
	}
	f.bgp = optional{name: "CiliumBGPAdvertisement", watch: f.watchBGP}
	f.calico = optional{name: "Calico IPPool", watch: f.watchCalico}
	if !served.BGP.Empty() {
		f.bgp.w, f.bgp.gvr = f.watchBGP(served.BGP), served.BGP
	}
	if !served.Calico.Empty() {
		f.calico.w, f.calico.gvr = f.watchCalico(served.Calico), served.Calico
	}
	if len(groups) > 0 {
		f.crds = f.watchCRDs()
	}
	return f
}

// Run starts the informers, which tell h of every change, and the search for
// kinds installed or removed later; it returns what reports their first
// lists (the CRDs' included).
func (f *Followed) Run(ctx context.Context, h KindsHandler) []cache.InformerSynced {
	f.h = h
	var synced []cache.InformerSynced
	for _, w := range f.All() {
		w.Run(ctx)
		synced = append(synced, w.Synced)
	}
	if f.crds != nil {
		f.crds.Run(ctx)
		synced = append(synced, f.crds.Synced)
		go f.followKinds(ctx)
	}
	return synced
}

// All returns the informers of the kinds served now.
func (f *Followed) All() []*Watched {
	var ws []*Watched
	for _, o := range []*optional{&f.bgp, &f.calico} {
		if w, _ := f.current(o); w != nil {
			ws = append(ws, w)
		}
	}
	for _, p := range f.followed() {
		ws = append(ws, p.w)
	}
	return ws
}

// spaceNow is the space now (nil without one: everything).
func (f *Followed) spaceNow() []netip.Prefix {
	if f.space == nil {
		return nil
	}
	return f.space()
}

// Reread lists again the objects of the kinds whose caches keep what a
// load balancer publishes (Kind.KeptStatus: Gateways), once they listed:
// the space grew (Caches.noteSpace).
func (f *Followed) Reread(ctx context.Context) {
	for _, p := range f.followed() {
		if p.kind.KeptStatus != nil && p.w.Synced() {
			p.w.Restart(ctx)
		}
	}
}

// Pools returns the pool kinds followed now with their caches.
func (f *Followed) Pools() []backends.Cached {
	var out []backends.Cached
	for _, p := range f.followed() {
		out = append(out, backends.Cached{Kind: p.kind, Store: p.w.Indexer()})
	}
	return out
}

// Advertisements returns the CiliumBGPAdvertisement cache, read and
// indexed (backends.ReadAdvertisement), and its resource; a nil store when
// the API server does not serve it.
func (f *Followed) Advertisements() (backends.Advertisements, schema.GroupVersionResource) {
	return backends.Advertisements{Store: f.indexer(&f.bgp)}, f.gvr(&f.bgp)
}

// CalicoPools returns the Calico IPPool cache, read and indexed
// (backends.ReadIPPool), and its resource; a nil store when the API server
// does not serve it.
func (f *Followed) CalicoPools() (backends.IPPools, schema.GroupVersionResource) {
	return backends.IPPools{Store: f.indexer(&f.calico)}, f.gvr(&f.calico)
}

func (f *Followed) indexer(o *optional) cache.Indexer {
	if w, _ := f.current(o); w != nil {
		return w.Indexer()
	}
	return nil
}

func (f *Followed) gvr(o *optional) schema.GroupVersionResource {
	_, gvr := f.current(o)
	return gvr
}

// Discover asks the API server what it serves now (backends.Discover).
type Discover func() (backends.Discovered, error)

// pooled is one pool kind and the informer over its objects.
type pooled struct {
	kind *backends.Kind
	w    *Watched
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// followed returns the pool kinds being followed now.
func (f *Followed) followed() []*pooled {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pools)
}

// Kinds returns the names of the pool kinds followed now.
func (f *Followed) Kinds() []string {
	var out []string
	for _, p := range f.followed() {
		out = append(out, p.kind.Name)
	}
	return out
}

func (f *Followed) newPooled(k *backends.Kind) *pooled {
	w := NewWatched(k.Resource, k.GVR, func() cache.SharedIndexInformer {
		slim := func(o any) (any, error) { return k.SlimIn(o, f.spaceNow()) }
		read := func(o any) (any, error) { return k.ReadIn(o, f.spaceNow()) }
		inf := Slimmed(f.dyn, k.GVR, k.Scope(), slim, read)
		_ = inf.AddIndexers(backends.Indexers)
		changed := func(o any) {
			if p, ok := o.(*backends.Pool); ok {
				f.h.PoolChanged(p)
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
func (f *Followed) watchCRDs() *Watched {
	ours := func(o any) bool {
		name := Name(o)
		for _, g := range f.groups {
			if strings.HasSuffix(name, "."+g) {
				return true
			}
		}
		return false
	}
	signal := func(o any) {
		if ours(o) {
			select {
			case f.rediscover <- struct{}{}:
			default:
			}
		}
	}
	return NewWatched("customresourcedefinitions", crdGVR, func() cache.SharedIndexInformer {
		inf := Metadata(f.meta, crdGVR)
		_ = inf.SetTransform(keepNameOnly)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(o any, initial bool) {
				if !initial {
					signal(o)
				}
			},
			UpdateFunc: func(old, new any) {
				if Version(old) != Version(new) {
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
func (f *Followed) followKinds(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.rediscover:
		}
		looks := 0
		b := backoff.New(time.Second, 30*time.Second)
		for looks < 10 {
			wait := time.Second
			changed, err := f.updateKinds(ctx)
			if err != nil {
				wait = b.Next()
				f.log.Debug("pool kind discovery failed; retrying", "err", err, "in", wait)
			} else {
				looks++
				b.Reset()
			}
			if changed || !backoff.Sleep(ctx, f.clock, wait) {
				break
			}
		}
	}
}

// updateKinds compares the served pool kinds with the followed ones, starts
// informers for new kinds (waiting until they are listed) and stops removed ones.
// It reports whether anything changed; on a discovery error nothing changes.
func (f *Followed) updateKinds(ctx context.Context) (bool, error) {
	s, err := f.discover()
	if err != nil {
		return false, err
	}
	served := s.Pools
	current := f.followed()
	changed := false
	for _, p := range current {
		if !slices.ContainsFunc(served, func(k *backends.Kind) bool { return k.GVR == p.kind.GVR }) {
			p.w.Halt()
			f.mu.Lock()
			f.pools = slices.DeleteFunc(f.pools, func(q *pooled) bool { return q == p })
			f.mu.Unlock()
			f.log.Info("pool kind no longer served; stopped following it", "kind", p.kind.Name, "version", p.kind.GVR.Version)
			changed = true
		}
	}
	for _, k := range served {
		if slices.ContainsFunc(current, func(p *pooled) bool { return p.kind.GVR == k.GVR }) {
			continue
		}
		p := f.newPooled(k)
		if !p.w.RunSynced(ctx) {
			continue // the next signal tries again
		}
		f.mu.Lock()
		f.pools = append(f.pools, p)
		f.mu.Unlock()
		f.log.Info("pool kind served; following it", "kind", k.Name, "version", k.GVR.Version)
		// Its objects were announced while it was listed, before passes could
		// see the kind: announce them again now that they can.
		for _, o := range p.w.Store().List() {
			if read, ok := o.(*backends.Pool); ok {
				f.h.PoolChanged(read)
			}
		}
		changed = true
	}
	bgp := f.update(ctx, &f.bgp, s.BGP)
	return f.update(ctx, &f.calico, s.Calico) || bgp || changed, nil
}

// optional is the informer over a resource the API server may serve or not.
type optional struct {
	name  string // the kind, for logs
	watch func(schema.GroupVersionResource) *Watched
	w     *Watched // nil while not served
	gvr   schema.GroupVersionResource
}

// update starts or stops following o's resource, served now as gvr (empty:
// not served), and reports whether anything changed.
func (f *Followed) update(ctx context.Context, o *optional, gvr schema.GroupVersionResource) bool {
	w, current := f.current(o)
	if current == gvr {
		return false
	}
	if w != nil {
		w.Halt()
		f.mu.Lock()
		o.w, o.gvr = nil, schema.GroupVersionResource{}
		f.mu.Unlock()
		f.log.Info(o.name+" no longer served; stopped following it", "version", current.Version)
	}
	if !gvr.Empty() {
		w := o.watch(gvr)
		if !w.RunSynced(ctx) {
			return true // the next signal tries again
		}
		f.mu.Lock()
		o.w, o.gvr = w, gvr
		f.mu.Unlock()
		f.log.Info(o.name+" served; following it", "version", gvr.Version)
	}
	f.h.KindsChanged() // what asks for it can be served now (or no longer)
	return true
}

// current returns o's informer and resource, nil when not served.
func (f *Followed) current(o *optional) (*Watched, schema.GroupVersionResource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return o.w, o.gvr
}

// watchCalico follows Calico's IPPools, each read once per change
// (backends.ReadIPPool): the annotated ones and our siblings matter; a change
// of either queues the DynamicPrefix it names.
func (f *Followed) watchCalico(gvr schema.GroupVersionResource) *Watched {
	return NewWatched("ippools", gvr, func() cache.SharedIndexInformer {
		inf := Dynamic(f.dyn, gvr, backends.Scope{})
		_ = inf.SetTransform(backends.ReadIPPool)
		_ = inf.AddIndexers(backends.IPPoolIndexers)
		changed := func(o any) {
			if p, ok := Unwrap(o).(*backends.IPPool); ok {
				f.h.CalicoPoolChanged(p)
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
			if Version(old) != Version(new) {
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

// watchBGP follows CiliumBGPAdvertisements, each read once per change
// (backends.ReadAdvertisement); a change of one of ours queues the
// DynamicPrefix it was made for.
func (f *Followed) watchBGP(gvr schema.GroupVersionResource) *Watched {
	return NewWatched("ciliumbgpadvertisements", gvr, func() cache.SharedIndexInformer {
		inf := Dynamic(f.dyn, gvr, backends.Scope{})
		_ = inf.SetTransform(backends.ReadAdvertisement)
		_ = inf.AddIndexers(backends.AdvertisementIndexers)
		changed := func(o any) {
			if a, ok := Unwrap(o).(*backends.CachedAdvertisement); ok && a.Ours() {
				f.h.AdvertisementChanged(a)
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
	return api.Bare(m), nil
}
