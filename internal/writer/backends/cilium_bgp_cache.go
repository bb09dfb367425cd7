// CiliumBGPAdvertisements in the follow model (issue 43): each advertisement
// is read once, when it changes, by its informer's transform
// (ReadAdvertisement) - which DynamicPrefix and subnet it was made for, by
// whom, its spec - and the cache is indexed by that DynamicPrefix. A pass
// looks the advertisements up and reads no object again.

package backends

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// CachedAdvertisement is one cached CiliumBGPAdvertisement, as read when it
// last changed.
type CachedAdvertisement struct {
	// Live is the object as the cache keeps it: writes and events name it.
	Live *unstructured.Unstructured
	// MadeFor is the DynamicPrefix its label names (AdvertisementFollows),
	// Subnet the subnet's, ManagedBy who made it.
	MadeFor, Subnet, ManagedBy string
	Labels                     map[string]string
	spec                       any // in JSON's own form, which SameAdvertisement compares
}

// GetObjectMeta makes a CachedAdvertisement an object the caches can key and
// version.
func (a *CachedAdvertisement) GetObjectMeta() metav1.Object { return a.Live }

// Name is the advertisement's name (advertisements are cluster-scoped).
func (a *CachedAdvertisement) Name() string { return a.Live.GetName() }

// Ours: renumber made it.
func (a *CachedAdvertisement) Ours() bool { return a.ManagedBy == CiliumManagedBy }

// Adopted reports whether it is the advertisement the existing operator
// created for dp's subnet.
func (a *CachedAdvertisement) Adopted(dp, subnet string) bool {
	return a.Name() == OperatorAdvertisementName(dp, subnet) && a.ManagedBy == dynamicprefix.OperatorManagedBy &&
		a.MadeFor == dp && a.Subnet == subnet
}

// ReadAdvertisement is the transform of the CiliumBGPAdvertisement
// informer: the object read once per change. Anything else - a tombstone, or
// an advertisement already read - passes unchanged.
func ReadAdvertisement(o any) (any, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o, nil
	}
	dp, _ := AdvertisementFollows(u)
	l := u.GetLabels()
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	return &CachedAdvertisement{Live: u, MadeFor: dp, Subnet: l[LabelSubnet], ManagedBy: l[CiliumLabelManagedBy],
		Labels: l, spec: normalJSON(spec)}, nil
}

// AdvertisementIndexers index the advertisement cache by the DynamicPrefix
// each was made for.
var AdvertisementIndexers = cache.Indexers{ByDynamicPrefix: func(o any) ([]string, error) {
	if a, ok := o.(*CachedAdvertisement); ok && a.MadeFor != "" {
		return []string{a.MadeFor}, nil
	}
	return nil, nil
}}

// NewAdvertisementCache is a cache of advertisements as their informer keeps
// them: each object added is read (ReadAdvertisement) and indexed
// (AdvertisementIndexers). Fixtures fill it by hand.
func NewAdvertisementCache() cache.Indexer {
	return reading{Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, AdvertisementIndexers), read: ReadAdvertisement}
}

// Advertisements is the advertisement cache, read (ReadAdvertisement) and
// indexed (AdvertisementIndexers).
type Advertisements struct{ Store cache.Indexer }

// MadeFor returns the advertisements made for dp, by name.
func (c Advertisements) MadeFor(dp string) []*CachedAdvertisement {
	return indexed(c.Store, ByDynamicPrefix, dp, (*CachedAdvertisement).Name)
}

// Get returns the advertisement named name.
func (c Advertisements) Get(name string) (*CachedAdvertisement, bool) {
	return get[*CachedAdvertisement](c.Store, name)
}

// SameAdvertisement reports whether live already is a.
func SameAdvertisement(live *CachedAdvertisement, a Advertisement) bool {
	for k, v := range a.Labels {
		if live.Labels[k] != v {
			return false
		}
	}
	return reflect.DeepEqual(live.spec, normalJSON(a.Spec))
}

// Adopt makes a the advertisement live, which the existing operator created
// (CachedAdvertisement.Adopted): its name, and its labels as they are (the
// user's CiliumBGPPeerConfig may select them), so that only the spec is ours.
func Adopt(a Advertisement, live *CachedAdvertisement) Advertisement {
	a.Name, a.Labels = live.Name(), live.Labels
	return a
}
