package caches

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

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
