package caches

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// Handler is told of the changes that can change what the writer writes.
type Handler interface {
	// DynamicPrefixChanged: added, its spec changed (not our status writes,
	// unless Config.StatusChanges), or deleted.
	DynamicPrefixChanged(name string)
	// DynamicPrefixStatusChanged: only its status changed (a write of ours):
	// a pass waiting for the cache to show that write looks again.
	DynamicPrefixStatusChanged(name string)
	// NodesChanged: a digest or a Node's readiness changed, or a Node came or went.
	NodesChanged()
	// ServiceChanged: a Service's annotations of ours or its published
	// ingress changed (or it came).
	ServiceChanged(s *holdings.CachedService)
	// Pools, advertisements, Calico IPPools and their kinds (kinds.go).
	KindsHandler
	// CiliumChanged: the Cilium DaemonSet's images changed.
	CiliumChanged()
}

// Config of the caches.
type Config struct {
	// NodeGrace > 0 caches Nodes typed (their Ready condition is read); 0 caches
	// only their metadata.
	NodeGrace time.Duration
	// BackendGroups are the API groups of pool kinds: a CRD of one of them being
	// installed or removed makes the writer look for pool kinds again.
	BackendGroups []string
	// TargetKeys are the DNS target annotations written on HA Services: the
	// Service cache keeps them (holdings.Slim).
	TargetKeys []string
	// CiliumNamespace, when set, is where the Cilium DaemonSet
	// (backends.DaemonSetSelector) is watched for the images it runs.
	CiliumNamespace string
	// CiliumWait is how long Run waits for the Cilium DaemonSet's cache
	// before going on without it (0: 30 s).
	CiliumWait time.Duration
	// StatusChanges makes a DynamicPrefix's status changes handler events too:
	// for a shadow writer, whose leader writes the status it compares with.
	StatusChanges bool
}

// Caches are the writer's informers.
type Caches struct {
	cfg   Config
	dyn   dynamic.Interface
	meta  metadata.Interface
	core  Typed
	clock clock.Clock
	log   *slog.Logger
	h     Handler

	nodes, dps, services *Watched
	cilium               *Watched // nil without CiliumNamespace
	kinds                *Followed

	// space is api.Space of the DynamicPrefix cache (nil until it listed:
	// everything), which the Service and Gateway caches keep published
	// addresses past the bound in (holdings.BoundedIn); grew asks for them
	// to be read again when it gains addresses (reread).
	space atomic.Pointer[[]netip.Prefix]
	grew  chan struct{}
}

// Typed reads, in protobuf: Services, the Cilium DaemonSet, and Nodes when
// their readiness counts.
type Typed interface {
	corev1client.NodesGetter
	corev1client.ServicesGetter
	appsv1client.DaemonSetsGetter
}

// New builds the informers and asks discovery once (a failure is retried in
// the background). Nothing runs before Run.
func New(cfg Config, dyn dynamic.Interface, meta metadata.Interface, core Typed, discover Discover, clk clock.Clock, log *slog.Logger) *Caches {
	c := &Caches{cfg: cfg, dyn: dyn, meta: meta, core: core, clock: clk, log: log, grew: make(chan struct{}, 1)}
	c.nodes = c.watchNodes()
	c.dps = c.watchDynamicPrefixes()
	c.services = c.watchServices()
	if cfg.CiliumNamespace != "" {
		c.cilium = c.watchCilium()
	}
	c.kinds = NewFollowed(cfg.BackendGroups, dyn, meta, discover, c.Space, clk, log)
	return c
}

// Run starts the informers, which tell h of every change that matters, and
// returns once they listed (false if ctx ended first).
func (c *Caches) Run(ctx context.Context, h Handler) bool {
	c.h = h
	// The DynamicPrefixes first: the Service cache keeps what load
	// balancers publish in their space, which must be known when it lists.
	c.dps.Run(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.dps.Synced) {
		return false
	}
	c.noteSpace()
	go c.reread(ctx)
	var synced []cache.InformerSynced
	for _, w := range c.own() {
		if w == c.dps {
			continue
		}
		w.Run(ctx)
		if w != c.cilium {
			synced = append(synced, w.Synced)
		}
	}
	synced = append(synced, c.kinds.Run(ctx, h)...)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return false
	}
	// The Cilium DaemonSet only refines a decision that defaults to the safe
	// side: a writer that cannot read it (no Role in its namespace) still runs.
	if c.cilium != nil {
		wait, cancel := context.WithTimeout(ctx, cmp.Or(c.cfg.CiliumWait, ciliumWait))
		defer cancel()
		if !cache.WaitForCacheSync(wait.Done(), c.cilium.Synced) && ctx.Err() == nil {
			c.log.Warn("cannot read the Cilium DaemonSet (the writer's Role in its namespace?); HA Services get the L2 announcer nudge until it can",
				"namespace", c.cfg.CiliumNamespace, "after", cmp.Or(c.cfg.CiliumWait, ciliumWait))
		}
	}
	if len(c.Kinds()) == 0 && ctx.Err() == nil {
		c.log.Warn("no pool kinds served yet (Cilium or MetalLB); only DynamicPrefix status will be written until one is installed")
	}
	return ctx.Err() == nil
}

// ciliumWait is how long Run waits for the Cilium DaemonSet's cache by
// default.
const ciliumWait = 30 * time.Second

// All returns every cache the writer reads now.
func (c *Caches) All() []*Watched { return append(c.own(), c.kinds.All()...) }

// own returns the caches of the kinds always served.
func (c *Caches) own() []*Watched {
	ws := []*Watched{c.nodes, c.dps, c.services}
	if c.cilium != nil {
		ws = append(ws, c.cilium)
	}
	return ws
}

// Synced reports whether every cache has listed (readiness); the Cilium
// DaemonSet's may not (Run).
func (c *Caches) Synced() bool {
	for _, w := range c.All() {
		if w != c.cilium && !w.Synced() {
			return false
		}
	}
	return true
}

// Ready is the writer's readiness: its caches have synced.
func (c *Caches) Ready(*http.Request) error {
	if !c.Synced() {
		return errors.New("caches not synced")
	}
	return nil
}

// Nodes returns the Node cache as the ballot reads it.
func (c *Caches) Nodes() []decide.Node {
	list := c.nodes.Store().List()
	out := make([]decide.Node, 0, len(list))
	for _, o := range list {
		if n, ok := ballotNode(o); ok {
			out = append(out, n)
		}
	}
	return out
}

// DynamicPrefixes is the DynamicPrefix cache.
func (c *Caches) DynamicPrefixes() cache.Store { return c.dps.Store() }

// Services is the Service cache: each Service read (holdings.CachedService)
// and indexed by the DynamicPrefix it follows (backends.Indexers).
func (c *Caches) Services() cache.Indexer { return c.services.Indexer() }

// CiliumImages returns the container images of the Cilium DaemonSet(s).
// known is false until the cache has listed them.
func (c *Caches) CiliumImages() (images []string, known bool) {
	if c.cilium == nil {
		return nil, true
	}
	if !c.cilium.Synced() {
		return nil, false
	}
	var out []string
	for _, o := range c.cilium.Store().List() {
		for _, ct := range o.(*appsv1.DaemonSet).Spec.Template.Spec.Containers {
			out = append(out, ct.Image)
		}
	}
	return out, true
}

// Pools returns the pool kinds followed now with their caches.
func (c *Caches) Pools() []backends.Cached { return c.kinds.Pools() }

// Kinds returns the names of the pool kinds followed now.
func (c *Caches) Kinds() []string { return c.kinds.Kinds() }

// Advertisements returns the CiliumBGPAdvertisement cache, read and indexed,
// and its resource; a nil store when the API server does not serve it.
func (c *Caches) Advertisements() (backends.Advertisements, schema.GroupVersionResource) {
	return c.kinds.Advertisements()
}

// watchNodes caches each Node as a NodeView: its name, our annotation and, when
// not Ready, since when. Kubelet's status updates (every few minutes per node)
// are compared on those fields only and cost no pass.
func (c *Caches) watchNodes() *Watched {
	return NewWatched("nodes", NodeGVR, func() cache.SharedIndexInformer {
		var inf cache.SharedIndexInformer
		if c.cfg.NodeGrace > 0 {
			// Typed (protobuf) Nodes: decoded into maps, 5,000 Nodes took the
			// writer to 133 MiB RSS; typed, 59 MiB (tools/bench, scale). Listed
			// by pages of slim Nodes, so the first list of a large cluster is
			// never in memory whole.
			nodes := c.core.Nodes()
			list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return slimNodes(ctx, nodes, o)
			}
			inf = Plain(list, nodes.Watch, &corev1.Node{})
		} else {
			inf = Metadata(c.meta, NodeGVR)
		}
		_ = inf.SetTransform(NodeView)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { c.h.NodesChanged() },
			UpdateFunc: func(old, new any) {
				if NodeState(old) != NodeState(new) {
					c.h.NodesChanged()
				}
			},
			DeleteFunc: func(any) { c.h.NodesChanged() },
		})
		return inf
	})
}

// Space is what the DynamicPrefixes' statuses name (api.Space), nil until
// their cache listed.
func (c *Caches) Space() []netip.Prefix {
	if p := c.space.Load(); p != nil {
		return *p
	}
	return nil
}

// noteSpace reads the space again from the DynamicPrefix cache once it
// listed, and when it gained addresses asks for the Services to be read
// again, and the Gateways: an address a load balancer published past the
// bound outside the space was dropped, and may be in it now.
func (c *Caches) noteSpace() {
	if !c.dps.Synced() {
		return
	}
	now := api.Space(c.dps.Store().List())
	was := c.space.Swap(&now)
	if was != nil && !api.Covers(*was, now) {
		select {
		case c.grew <- struct{}{}:
		default:
		}
	}
}

// reread lists the Services again, and the Gateways (Followed.Reread),
// each time the space grew, until ctx ends.
func (c *Caches) reread(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.grew:
		}
		if c.services.Synced() {
			c.log.Info("the DynamicPrefixes' space grew; reading the Services and Gateways again")
			c.services.Restart(ctx)
		}
		c.kinds.Reread(ctx)
	}
}

func (c *Caches) watchDynamicPrefixes() *Watched {
	return NewWatched("dynamicprefixes", api.GVR, func() cache.SharedIndexInformer {
		inf := Dynamic(c.dyn, api.GVR, backends.Scope{})
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { c.noteSpace(); c.h.DynamicPrefixChanged(Name(o)) },
			UpdateFunc: func(old, new any) {
				c.noteSpace()
				// Our own status writes change nothing we act on: only spec
				// changes, and a deletion held by a finalizer.
				o, n := old.(*unstructured.Unstructured), new.(*unstructured.Unstructured)
				switch {
				case o.GetGeneration() != n.GetGeneration() || (o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil) ||
					(c.cfg.StatusChanges && o.GetResourceVersion() != n.GetResourceVersion()):
					c.h.DynamicPrefixChanged(n.GetName())
				case o.GetResourceVersion() != n.GetResourceVersion():
					c.h.DynamicPrefixStatusChanged(n.GetName())
				}
			},
			DeleteFunc: func(o any) { c.noteSpace(); c.h.DynamicPrefixChanged(Name(o)) },
		})
		return inf
	})
}

// watchServices caches each Service as holdings.Slim keeps it, read once
// (holdings.ReadService): clusters with thousands of Services cost a few bytes
// each (the operator we replace spent its memory here). A change of anything
// else (ports, selector, labels) costs no pass.
func (c *Caches) watchServices() *Watched {
	return NewWatched("services", holdings.ServiceGVR, func() cache.SharedIndexInformer {
		services := c.core.Services(metav1.NamespaceAll)
		list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return slimServices(ctx, services, c.cfg.TargetKeys, c.Space(), o)
		}
		inf := Plain(list, services.Watch, &corev1.Service{})
		_ = inf.SetTransform(func(o any) (any, error) {
			if s, ok := o.(*corev1.Service); ok {
				return holdings.ReadServiceIn(s, c.cfg.TargetKeys, c.Space()), nil
			}
			return o, nil
		})
		_ = inf.AddIndexers(backends.Indexers)
		changed := func(o any) {
			if s, ok := o.(*holdings.CachedService); ok {
				c.h.ServiceChanged(s)
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: changed,
			UpdateFunc: func(old, new any) {
				o, ok := old.(*holdings.CachedService)
				n, ok2 := new.(*holdings.CachedService)
				if ok && ok2 && (!maps.Equal(o.Annotations, n.Annotations) || !slices.Equal(o.Ingress, n.Ingress)) {
					changed(n)
				}
			},
		})
		return inf
	})
}

// slimNodes lists Nodes by pages and keeps a SlimNode copy of each.
func slimNodes(ctx context.Context, nodes corev1client.NodeInterface, o metav1.ListOptions) (*corev1.NodeList, error) {
	out := &corev1.NodeList{}
	err := paged(ctx, o, &out.ListMeta, func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
		p, err := nodes.List(ctx, o)
		if err == nil {
			for i := range p.Items {
				out.Items = append(out.Items, SlimNode(&p.Items[i]))
			}
		}
		return p, err
	})
	return out, err
}

// slimServices lists Services by pages and keeps a holdings.Slim copy of each.
func slimServices(ctx context.Context, services corev1client.ServiceInterface, keys []string, space []netip.Prefix, o metav1.ListOptions) (*corev1.ServiceList, error) {
	out := &corev1.ServiceList{}
	err := paged(ctx, o, &out.ListMeta, func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
		p, err := services.List(ctx, o)
		if err == nil {
			for i := range p.Items {
				out.Items = append(out.Items, *holdings.SlimIn(&p.Items[i], keys, space))
			}
		}
		return p, err
	})
	return out, err
}

// watchCilium caches the Cilium agent DaemonSet(s) of CiliumNamespace down to
// their containers' images: which Cilium runs decides the L2 announcer nudge.
func (c *Caches) watchCilium() *Watched {
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
	scope := backends.Scope{Namespace: c.cfg.CiliumNamespace, Labels: backends.DaemonSetSelector}
	w := NewWatched("daemonsets", gvr, func() cache.SharedIndexInformer {
		ds := c.core.DaemonSets(scope.Namespace)
		list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return ds.List(ctx, scope.Options(o))
		}
		watchFn := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ds.Watch(ctx, scope.Options(o))
		}
		inf := Plain(list, watchFn, &appsv1.DaemonSet{})
		_ = inf.SetTransform(func(o any) (any, error) {
			d, ok := o.(*appsv1.DaemonSet)
			if !ok {
				return o, nil
			}
			out := &appsv1.DaemonSet{}
			out.Name, out.Namespace, out.ResourceVersion, out.UID = d.Name, d.Namespace, d.ResourceVersion, d.UID
			for _, ct := range d.Spec.Template.Spec.Containers {
				out.Spec.Template.Spec.Containers = append(out.Spec.Template.Spec.Containers, corev1.Container{Name: ct.Name, Image: ct.Image})
			}
			return out, nil
		})
		changed := func(any) { c.h.CiliumChanged() }
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: changed,
			UpdateFunc: func(old, new any) {
				if !equality.Semantic.DeepEqual(old.(*appsv1.DaemonSet).Spec, new.(*appsv1.DaemonSet).Spec) {
					c.h.CiliumChanged()
				}
			},
			DeleteFunc: changed,
		})
		return inf
	})
	w.Scope = scope
	return w
}

// page is how many objects one list request returns.
const page = 500

// slimPage is how many objects one list request of a pool kind returns (its
// transform, the kind's Slim, keeps little of each). Anyone who may create
// one - a tenant's NetworkPolicy or network set - can make it 1.5 MiB, the
// API server's limit, which decoded as maps is about 24 MiB: the list must
// never hold more than one such page whole. It costs a request per object
// when the writer lists (at start, and to heal a watch that fell behind).
const slimPage = 1

// paged lists page by page (one consistent snapshot, the first page's
// resourceVersion), so the first list of a large cluster is never in memory
// whole: list keeps what it needs of each page; meta gets the snapshot's
// resourceVersion.
func paged(ctx context.Context, o metav1.ListOptions, meta *metav1.ListMeta, list func(context.Context, metav1.ListOptions) (metav1.ListInterface, error)) error {
	return pagedBy(ctx, page, o, meta, list)
}

// pagedBy is paged with n objects a page.
func pagedBy(ctx context.Context, n int64, o metav1.ListOptions, meta *metav1.ListMeta, list func(context.Context, metav1.ListOptions) (metav1.ListInterface, error)) error {
	o.Limit, o.ResourceVersion, o.ResourceVersionMatch = n, "", ""
	for {
		p, err := list(ctx, o)
		if err != nil {
			return err
		}
		if meta.ResourceVersion == "" {
			meta.ResourceVersion = p.GetResourceVersion()
		}
		if p.GetContinue() == "" {
			return nil
		}
		o.Continue = p.GetContinue()
	}
}

// CalicoPools returns the Calico IPPool cache, read and indexed, and its
// resource; a nil store when the API server does not serve it.
func (c *Caches) CalicoPools() (backends.IPPools, schema.GroupVersionResource) {
	return c.kinds.CalicoPools()
}
