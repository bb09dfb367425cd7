package caches

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backends"
)

// pools records the Pools a pool informer announces.
type pools struct {
	mu   sync.Mutex
	seen []string
}

func (p *pools) PoolChanged(r *backends.Pool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, r.Key()+" follows "+r.Follow.DynamicPrefix)
}
func (*pools) AdvertisementChanged(*backends.CachedAdvertisement) {}
func (*pools) KindsChanged()                                      {}
func (*pools) CalicoPoolChanged(*backends.IPPool)                 {}

// TestAPoolInformerKeepsEachObjectReadOnce: the informer over a pool kind
// reads each object as it lists it (backends.Kind.Read), announces the Pool,
// and finds the followers of a DynamicPrefix by its index.
func TestAPoolInformerKeepsEachObjectReadOnce(t *testing.T) {
	k := backends.NetworkPolicyKind()
	var objs []runtime.Object
	for i, dp := range []string{"home", "away", "home"} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"spec": map[string]any{"ingress": []any{map[string]any{"from": []any{
				map[string]any{"ipBlock": map[string]any{"cidr": "2001:db8:1::/64"}}}}}}}}
		u.SetNamespace("tenant")
		u.SetName(fmt.Sprintf("p%d", i))
		u.SetAnnotations(map[string]string{dynamicprefix.AnnotationName: dp})
		objs = append(objs, u)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{k.GVR: "NetworkPolicyList"}, objs...)
	h := &pools{}
	f := &Followed{log: slog.New(slog.NewTextHandler(io.Discard, nil)), dyn: client, h: h}
	before := backends.Decoded()
	p := f.newPooled(k)
	f.pools = []*pooled{p}
	p.w.Run(t.Context())
	if !cache.WaitForCacheSync(t.Context().Done(), p.w.Synced) {
		t.Fatal("the informer did not list")
	}
	if n := backends.Decoded() - before; n != int64(len(objs)) {
		t.Errorf("listing %d objects read %d, want each once", len(objs), n)
	}
	var home []string
	for _, r := range f.Pools()[0].Following("home") {
		home = append(home, r.Key())
		if len(r.Entries) != 1 || r.Err != nil {
			t.Errorf("%s read as %v, %v; want its one entry", r.Key(), r.Entries, r.Err)
		}
	}
	if want := []string{"tenant/p0", "tenant/p2"}; !slices.Equal(home, want) {
		t.Errorf("followers of home %v, want %v", home, want)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	slices.Sort(h.seen)
	if want := []string{"tenant/p0 follows home", "tenant/p1 follows away", "tenant/p2 follows home"}; !slices.Equal(h.seen, want) {
		t.Errorf("announced %q, want %q", h.seen, want)
	}
}

// A Gateway's cache keeps what its controller echoes past the bound only
// inside the DynamicPrefixes' space (backends.Kind.SlimIn), as the Service
// cache does; when the space grows it lists the Gateways again (Reread), so
// an echoed address it dropped and that renumber may give now is kept.
func TestAGatewayCacheKeepsItsSurplusInTheSpaceAndReadsAgainWhenItGrows(t *testing.T) {
	k := backends.GatewayKind("v1")
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"spec": map[string]any{"gatewayClassName": "cilium"}}}
	u.SetNamespace("tenant")
	u.SetName("gw")
	u.SetAnnotations(map[string]string{dynamicprefix.AnnotationName: "home", "dynamic-prefix.io/suffix": "::77"})
	var echoed []any
	for i := range 64 {
		echoed = append(echoed, map[string]any{"type": "IPAddress", "value": fmt.Sprintf("2001:db8:eeee::%x", i+1)})
	}
	const far = "2001:db8:2::99" // past the bound, outside the space until it grows
	echoed = append(echoed, map[string]any{"type": "IPAddress", "value": far})
	if err := unstructured.SetNestedSlice(u.Object, echoed, "status", "addresses"); err != nil {
		t.Fatal(err)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{k.GVR: "GatewayList"})
	// Created, not given: the fake files objects it is given under the
	// resource it guesses from their kind ("gatewaies").
	if _, err := client.Resource(k.GVR).Namespace("tenant").Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	space := []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")}
	f := &Followed{log: slog.New(slog.NewTextHandler(io.Discard, nil)), dyn: client, h: &pools{},
		space: func() []netip.Prefix { mu.Lock(); defer mu.Unlock(); return space }}
	p := f.newPooled(k)
	f.pools = []*pooled{p}
	p.w.Run(t.Context())
	if !cache.WaitForCacheSync(t.Context().Done(), p.w.Synced) {
		t.Fatal("the informer did not list")
	}
	published := func() []string {
		t.Helper()
		if _, ok := f.Pools()[0].Get("tenant/gw"); !ok {
			t.Fatalf("tenant/gw is not cached: %v", f.Pools()[0].Store.ListKeys())
		}
		return backends.PublishedFor(cache.NewIndexer(cache.MetaNamespaceKeyFunc, backends.Indexers), f.Pools(), far)
	}
	if got := published(); len(got) > 0 {
		t.Errorf("outside the space, %s reads as published for %q", far, got)
	}
	mu.Lock()
	space = append(space, netip.MustParsePrefix("2001:db8:2::/64"))
	mu.Unlock()
	f.Reread(t.Context())
	if got := published(); !slices.Equal(got, []string{"Gateway tenant/gw"}) {
		t.Errorf("once the space holds it, %s reads as published for %q, want Gateway tenant/gw", far, got)
	}
}
