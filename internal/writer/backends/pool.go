// The follow model at the cache boundary (issue 43): each object of a Kind is
// read once, when it changes, by its informer's transform (Kind.Read), into a
// Pool - what it follows, where its entries live, the entries and our record,
// or why it cannot be read. The caches hold Pools indexed by the DynamicPrefix
// they follow; a pass looks its followers up and reads no object again.

package backends

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Pool is one cached object of a Kind, as read when it last changed.
type Pool struct {
	// Object is what it follows, holds and we own; of one not ours, or one
	// that cannot be read, its identity and what it follows only.
	Object
	// Live is the object as the cache keeps it (Kind.Slim): events and
	// writes name it, and a kind that writes with Place reads it then.
	Live *unstructured.Unstructured
	// Ours: it follows a DynamicPrefix or carries our record.
	Ours bool
	// Err says why it cannot be read (garbled entries, too large): it is
	// reported on every pass over its DynamicPrefix and never written.
	Err error
}

// GetObjectMeta makes a Pool an object the caches can key and version.
func (p *Pool) GetObjectMeta() metav1.Object { return p.Live }

// Read is the transform of the kind's informer: the object slimmed (Slim)
// and read (Decode), once per change. Anything else - a tombstone, or a Pool
// already read - passes unchanged.
func (k *Kind) Read(o any) (any, error) { return k.ReadIn(o, nil) }

// ReadIn is Read slimming in space (SlimIn).
func (k *Kind) ReadIn(o any, space []netip.Prefix) (any, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o, nil
	}
	slim, err := k.SlimIn(u, space)
	if err != nil {
		return nil, err
	}
	u = slim.(*unstructured.Unstructured)
	obj, ours, err := k.Decode(u)
	if err != nil || !ours {
		obj = Object{Kind: k, Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion(), Held: holdings.Held{Follow: PoolFollowOf(u)}}
	}
	return &Pool{Object: obj, Live: u, Ours: ours, Err: err}, nil
}

// ByDynamicPrefix is the index of a pool cache by the DynamicPrefix each
// Pool follows.
const ByDynamicPrefix = "dynamicprefix"

// ByPublished is the index of a pool cache and of the Service cache by the
// IPv6 addresses a load balancer publishes for each object: a Service's
// status.loadBalancer.ingress, a claiming kind's status (a Gateway's
// status.addresses, Kind.Published). renumber gives only IPv6 addresses.
const ByPublished = "published"

// Indexers are the indexes of a pool cache and of the Service cache.
var Indexers = cache.Indexers{
	ByDynamicPrefix: func(o any) ([]string, error) {
		dp := ""
		switch o := o.(type) {
		case *Pool:
			dp = o.Follow.DynamicPrefix
		case *holdings.CachedService:
			dp = o.Follow.DynamicPrefix
		}
		if dp == "" {
			return nil, nil
		}
		return []string{dp}, nil
	},
	ByPublished: func(o any) ([]string, error) {
		var published []string
		var more []netip.Prefix
		switch o := o.(type) {
		case *Pool: // Live is as the cache bounded it (Kind.SlimIn)
			published, more = holdings.KeptPublished(o.Kind.PublishedOf(o.Live))
		case *holdings.CachedService:
			published, more = o.Ingress, o.More
		}
		var out []string
		for _, e := range published {
			if a, err := netip.ParseAddr(e); err == nil && a.Is6() && !a.Is4In6() && !slices.Contains(out, a.String()) {
				out = append(out, a.String())
			}
		}
		for _, p := range more {
			out = append(out, holdings.MoreKey(p))
		}
		return out, nil
	},
}

// PublishedFor is who a load balancer publishes addr (canonical) for, as
// the claims name them: a Service of services as "namespace/name", an
// object of a claiming kind of pools as "Kind namespace/name" (a Gateway).
// An object whose cache kept only the /64 of some of its addresses
// (holdings.Bounded: a tenant past the bound) is taken to publish every
// address in it: named rather than missed (red team r7a).
func PublishedFor(services cache.Indexer, pools []Cached, addr string) []string {
	var out []string
	keys := append([]string{addr}, holdings.MoreKeys(addr)...)
	key := func(s *holdings.CachedService) string { return s.Namespace + "/" + s.Name }
	add := func(who string) {
		if !slices.Contains(out, who) {
			out = append(out, who)
		}
	}
	for _, k := range keys {
		for _, s := range indexed(services, ByPublished, k, key) {
			add(key(s))
		}
	}
	for _, c := range pools {
		if !c.Kind.Claims {
			continue
		}
		for _, k := range keys {
			for _, p := range indexed(c.Store, ByPublished, k, (*Pool).Key) {
				add(p.Kind.Name + " " + p.Key())
			}
		}
	}
	return out
}

// GeneratedPublished is what a load balancer publishes (canonical, as the
// Service cache keeps it: Ingress) for the Service p's controller generated
// for it (Kind.Generated); none for a kind with no such Service, or while
// the cache holds none.
func GeneratedPublished(services cache.Indexer, p *Pool) []string {
	if p.Kind.Generated == nil {
		return nil
	}
	s, ok := get[*holdings.CachedService](services, p.Kind.Generated(p.Namespace, p.Name))
	if !ok {
		return nil
	}
	return s.Ingress
}

// GeneratedBy is the object whose controller generated the Service s for
// it (Kind.Generated): s's controller reference names an object of a kind
// with such Services, the cache holds that object (the same UID), and s has
// the name that kind's controller gives the Service it generates. Such a
// Service carries what its object says (a Gateway's
// spec.infrastructure.annotations) and is its controller's to write: the
// object is what follows. The name alone proves nothing - a tenant may name
// a Service cilium-gateway-x - and a reference alone neither.
func GeneratedBy(pools []Cached, s *holdings.CachedService) (*Pool, bool) {
	ref := metav1.GetControllerOfNoCopy(s)
	if ref == nil {
		return nil, false
	}
	group, _, _ := strings.Cut(ref.APIVersion, "/")
	for _, c := range pools {
		k := c.Kind
		if k.Generated == nil || k.GVR.Group != group || k.Name != ref.Kind || k.Generated(s.Namespace, ref.Name) != s.Namespace+"/"+s.Name {
			continue
		}
		if p, ok := c.Get(s.Namespace + "/" + ref.Name); ok && p.Live.GetUID() == ref.UID {
			return p, true
		}
	}
	return nil, false
}

// ServicesFollowing returns the Services of the Service cache that follow
// the DynamicPrefix dp, in the order of their keys: a pass names the same
// one first each time (the first error is its status's message).
func ServicesFollowing(services cache.Indexer, dp string) []*holdings.CachedService {
	return indexed(services, ByDynamicPrefix, dp, func(s *holdings.CachedService) string { return s.Namespace + "/" + s.Name })
}

// Following returns the Pools of the cache that follow the DynamicPrefix dp,
// in the order of their keys.
func (c Cached) Following(dp string) []*Pool {
	return indexed(c.Store, ByDynamicPrefix, dp, (*Pool).Key)
}

// Get returns the Pool under key ("name" or "namespace/name").
func (c Cached) Get(key string) (*Pool, bool) { return get[*Pool](c.Store, key) }

// indexed returns the objects of type T that store holds under index and
// key, in the order key gives them.
func indexed[T any](store cache.Indexer, index, key string, order func(T) string) []T {
	objs, _ := store.ByIndex(index, key)
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(order(a), order(b)) })
	return out
}

// get returns the object of type T that store holds under key.
func get[T any](store cache.Indexer, key string) (T, bool) {
	var t T
	o, ok, err := store.GetByKey(key)
	if err != nil || !ok {
		return t, false
	}
	t, ok = o.(T)
	return t, ok
}

// NewCache is a cache of k's objects as its informer keeps them: each object
// added is read (Read) and indexed (Indexers). Fixtures fill it by hand.
func NewCache(k *Kind) cache.Indexer {
	return reading{Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, Indexers), read: k.Read}
}

// NewCacheIn is NewCache reading each object in the space space returns
// when it is added (ReadIn), as the writer's informer does.
func NewCacheIn(k *Kind, space func() []netip.Prefix) cache.Indexer {
	return reading{Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, Indexers),
		read: func(o any) (any, error) { return k.ReadIn(o, space()) }}
}

// reading is an Indexer that reads each object put in.
type reading struct {
	cache.Indexer
	read cache.TransformFunc
}

func (r reading) Add(o any) error    { return r.Indexer.Add(r.must(o)) }
func (r reading) Update(o any) error { return r.Indexer.Update(r.must(o)) }
func (r reading) Replace(list []any, rv string) error {
	out := make([]any, len(list))
	for i, o := range list {
		out[i] = r.must(o)
	}
	return r.Indexer.Replace(out, rv)
}

func (r reading) must(o any) any {
	if p, err := r.read(o); err == nil {
		return p
	}
	return o
}
