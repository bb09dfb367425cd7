// Calico IPPools in the follow model (issue 43): each IPPool is read once,
// when it changes, by its informer's transform (ReadIPPool) into an IPPool -
// what it follows and in which role, its CIDR, our record, whose sibling it
// is - and the cache is indexed by the DynamicPrefix it follows, by the
// annotated pool a sibling copies, and by release. A pass looks its pools up
// and reads no object again.

package backends

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// IPPool is one cached Calico IPPool, as read when it last changed.
type IPPool struct {
	// Live is the object as the cache keeps it: writes and events name it.
	Live *unstructured.Unstructured
	// Follows is the DynamicPrefix it follows (CalicoFollows): the user's
	// pool by its annotation (Role Follower), a sibling by its label (Made).
	Follows string
	Role    Role
	// Follow is what the user's pool asks for (its range or subnet).
	Follow holdings.PoolFollow
	// CIDR is spec.cidr as it reads; Settings its spec, which a sibling
	// copies (RenderCalico); Labels its labels.
	CIDR     string
	Settings map[string]any
	Labels   map[string]string
	// Record is the CIDR we recorded on the user's pool (CalicoRecord).
	Record   string
	Recorded bool
	// Parent is the user's pool a sibling belongs to ("" for any other
	// pool); Adopted: the existing operator created it.
	Parent  string
	Adopted bool
	// spec is Settings in JSON's own form, which SameCalico compares.
	spec any
}

// GetObjectMeta makes an IPPool an object the caches can key and version.
func (p *IPPool) GetObjectMeta() metav1.Object { return p.Live }

// Name is the IPPool's name (IPPools are cluster-scoped).
func (p *IPPool) Name() string { return p.Live.GetName() }

// ReadIPPool is the transform of the IPPool informer: the object read once
// per change. Anything else - a tombstone, or an IPPool already read -
// passes unchanged.
func ReadIPPool(o any) (any, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o, nil
	}
	dp, role := CalicoFollows(u)
	cidr, _, _ := unstructured.NestedString(u.Object, "spec", "cidr")
	settings, _, _ := unstructured.NestedMap(u.Object, "spec")
	record, recorded := CalicoRecord(u)
	p := &IPPool{Live: u, Follows: dp, Role: role, CIDR: cidr, Settings: settings, Labels: u.GetLabels(),
		Record: record, Recorded: recorded, Parent: CalicoParent(u), Adopted: CalicoAdopted(u), spec: normalJSON(settings)}
	if role == Follower {
		p.Follow = PoolFollowOf(u)
	}
	return p, nil
}

// Sibling is a pool we own: one we created, or one the existing operator
// created.
func (p *IPPool) Sibling() bool { return p.Parent != "" }

// Released is the user's pool that carries our record and follows nothing
// any more: the record is to be removed.
func (p *IPPool) Released() bool { return p.Recorded && !p.Sibling() && p.Role == None }

// The indexes of the IPPool cache beside ByDynamicPrefix (the user's pools
// by their annotation, our siblings by their label).
const (
	// BySiblingOf: the siblings of one user's pool, ours and adopted.
	BySiblingOf = "siblingof"
	// ByRelease: the user's pools to release (Released), under "".
	ByRelease = "release"
)

// IPPoolIndexers are the indexes of the IPPool cache.
var IPPoolIndexers = cache.Indexers{
	ByDynamicPrefix: ippoolIndex(func(p *IPPool) (string, bool) {
		return p.Follows, p.Follows != "" && !p.Adopted // an adopted sibling drains for its parent's
	}),
	BySiblingOf: ippoolIndex(func(p *IPPool) (string, bool) { return p.Parent, p.Sibling() }),
	ByRelease:   ippoolIndex(func(p *IPPool) (string, bool) { return "", p.Released() }),
}

func ippoolIndex(key func(*IPPool) (string, bool)) cache.IndexFunc {
	return func(o any) ([]string, error) {
		if p, ok := o.(*IPPool); ok {
			if k, ok := key(p); ok {
				return []string{k}, nil
			}
		}
		return nil, nil
	}
}

// NewIPPoolCache is a cache of IPPools as their informer keeps them: each
// object added is read (ReadIPPool) and indexed (IPPoolIndexers). Fixtures
// fill it by hand.
func NewIPPoolCache() cache.Indexer {
	return reading{Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, IPPoolIndexers), read: ReadIPPool}
}

// IPPools is the IPPool cache, read (ReadIPPool) and indexed
// (IPPoolIndexers).
type IPPools struct{ Store cache.Indexer }

// Following returns the user's pools that follow dp, by name.
func (c IPPools) Following(dp string) []*IPPool {
	return slices.DeleteFunc(c.by(ByDynamicPrefix, dp), func(p *IPPool) bool { return p.Role != Follower })
}

// Released returns the user's pools to release (IPPool.Released), by name.
func (c IPPools) Released() []*IPPool { return c.by(ByRelease, "") }

// SiblingsOf returns the siblings of the user's pool parent, by name.
func (c IPPools) SiblingsOf(parent string) []*IPPool { return c.by(BySiblingOf, parent) }

// Siblings returns the siblings that drain for dp, by name: ours by their
// label, the existing operator's by their parent's annotation.
func (c IPPools) Siblings(dp string) []*IPPool {
	var out []*IPPool
	for _, p := range c.by(ByDynamicPrefix, dp) {
		if p.Sibling() {
			out = append(out, p)
			continue
		}
		for _, s := range c.SiblingsOf(p.Name()) {
			if s.Adopted {
				out = append(out, s)
			}
		}
	}
	slices.SortFunc(out, func(a, b *IPPool) int { return cmp.Compare(a.Name(), b.Name()) })
	return out
}

// Get returns the IPPool named name.
func (c IPPools) Get(name string) (*IPPool, bool) { return get[*IPPool](c.Store, name) }

func (c IPPools) by(index, key string) []*IPPool { return indexed(c.Store, index, key, (*IPPool).Name) }
