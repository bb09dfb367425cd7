package controller

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// Each object is read once, when it changes (issue 43): a pass reads the
// model its cache keeps, never the object again.

// crowd adds n pools, n Services and n Calico IPPools beside the fixture's,
// each following a DynamicPrefix of its own (not home), and n more of each
// following none, and n CiliumBGPAdvertisements made for the others, as a
// large cluster holds them; and a Calico IPPool following home that holds its
// prefix already. The caches catch up.
func (f *fixture) crowd(n int) {
	f.t.Helper()
	ctx := f.t.Context()
	f.calico, f.bgp = calicoCache(), bgpCache()
	f.cache(f.calico, ippool("home-v6", prefixA, map[string]string{dynamicprefix.AnnotationName: "home", backends.CalicoRecordKey: prefixA}))
	for i := range 2 * n {
		ann := map[string]string{}
		if i < n {
			ann[dynamicprefix.AnnotationName] = fmt.Sprint("other-", i)
			adv := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
				"metadata": map[string]any{"name": fmt.Sprint("adv-", i), "resourceVersion": "1"},
				"spec":     map[string]any{"advertisements": []any{map[string]any{"advertisementType": "Service"}}},
			}}
			adv.SetLabels(backends.MadeFor(fmt.Sprint("other-", i), map[string]string{backends.CiliumLabelManagedBy: backends.CiliumManagedBy, backends.LabelSubnet: "public"}))
			f.cache(f.bgp, adv)
		}
		f.cache(f.calico, ippool(fmt.Sprint("ippool-", i), fmt.Sprintf("2001:db8:%x::/64", 0x100+i), ann))
		pool := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
			"metadata": map[string]any{"name": fmt.Sprint("pool-", i), "resourceVersion": "1"},
			"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)}}},
		}}
		pool.SetAnnotations(ann)
		if _, err := f.dyn.Resource(poolGVR).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
			f.t.Fatal(err)
		}
		svc := &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("svc-", i), ResourceVersion: "1",
				Annotations: map[string]string{holdings.AnnotationSuffix: "::1"}},
		}
		for k, v := range ann {
			svc.Annotations[k] = v
		}
		if err := f.meta.Tracker().Create(holdings.ServiceGVR, svc, "default"); err != nil {
			f.t.Fatal(err)
		}
	}
	f.catchUp()
}

// reads is how many objects have been read so far: decoded, or their follow
// annotation or label looked up.
func reads() int64 { return backends.Decoded() + holdings.ServicesRead() + backends.Looked() }

// ippool is a Calico IPPool named name holding cidr, with annotations ann.
func ippool(name, cidr string, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": name, "resourceVersion": "1"},
		"spec":     map[string]any{"cidr": cidr, "ipipMode": "Never"},
	}}
	u.SetAnnotations(ann)
	return u
}

// cache puts u into the cache c as its informer would.
func (f *fixture) cache(c cache.Store, u *unstructured.Unstructured) {
	f.t.Helper()
	if err := c.Add(u); err != nil {
		f.t.Fatal(err)
	}
}

func calicoCache() cache.Indexer { return backends.NewIPPoolCache() }
func bgpCache() cache.Indexer    { return backends.NewAdvertisementCache() }

// BenchmarkSteadyPass is the writer's pass over one DynamicPrefix in a cluster
// of 1,000 pools and 1,000 Services that follow others or none: nothing to
// write. It reports the objects read per cached object and pass.
func BenchmarkSteadyPass(b *testing.B) {
	const n = 500
	f := converged(b, generous)
	f.crowd(n)
	f.sync(passHome)
	before := reads()
	passes := 0
	for b.Loop() {
		f.clock.Step(time.Minute)
		if got := f.sync(passHome); len(got) != 0 {
			b.Fatalf("nothing changed, yet the pass wrote %q", got)
		}
		passes++
	}
	objects := 3*2*n + n + 3 // the crowd's pools, Services, IPPools and advertisements, and the fixture's
	b.ReportMetric(float64(reads()-before)/float64(passes*objects), "reads/object/pass")
}
func TestAPassReadsNoCachedObjectAgain(t *testing.T) {
	f := converged(t, generous)
	f.crowd(50)
	f.sync(passHome) // what the crowd changed, if anything, settles
	before := reads()
	for range 3 {
		f.clock.Step(time.Minute)
		if got := f.sync(passHome); len(got) != 0 {
			t.Fatalf("nothing changed, yet the pass wrote %q", got)
		}
	}
	if n := reads() - before; n != 0 {
		t.Errorf("3 passes that found nothing to change read %d objects from the caches, want 0 (each is read when it changes)", n)
	}
}
