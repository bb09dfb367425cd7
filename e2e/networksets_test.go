package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

var (
	networkSetGVR       = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "networksets"}
	globalNetworkSetGVR = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "globalnetworksets"}
)

// nets returns a network set's spec.nets (namespace "" for a global one).
func nets(t *testing.T, w *world.World, gvr schema.GroupVersionResource, namespace, name string) []string {
	t.Helper()
	u, err := w.API.Dynamic.Resource(gvr).Namespace(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "nets")
	return out
}

// allowEvent is one version of a followed object, as a watch delivered it.
type allowEvent struct {
	rv      uint64
	object  string // resource/name
	entries []string
}

// TestCalicoNetworkSetsFollowBeforeAnyPool, on Calico's real NetworkSet and
// GlobalNetworkSet CRDs, through three renumberings with maxPrefixHistory 2:
// each set holds the pooled prefixes (or the subnet it names in each) beside
// the user's nets, which stay; one write per object per renumbering; a set
// that follows nothing is never written; and in every version the API server
// stored, in the order it stored them, no pool holds a prefix an allow-list
// does not hold yet, nor one it dropped already. Deleting the DynamicPrefix
// leaves the user's nets only.
func TestCalicoNetworkSetsFollowBeforeAnyPool(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	if err := w.API.InstallCalico(ctx); err != nil {
		t.Fatal(err)
	}
	prefixC, prefixD := netip.MustParsePrefix("2001:db8:3:300::/64"), netip.MustParsePrefix("2001:db8:4:400::/64")
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{
		"subnets":    []any{map[string]any{"name": "svc", "offset": 1, "prefixLength": 112}},
		"transition": map[string]any{"maxPrefixHistory": 2},
	})
	createPool(t, w)
	userLAN := []string{"10.0.0.0/8", "2001:db8:ffff::/64"}
	apply(t, w, networkSetGVR, map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "NetworkSet",
		"metadata": map[string]any{"name": "lan", "namespace": "default", "annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec":     map[string]any{"nets": userLAN},
	})
	apply(t, w, globalNetworkSetGVR, map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "GlobalNetworkSet",
		"metadata": map[string]any{"name": "svc", "annotations": map[string]any{
			dynamicprefix.AnnotationName: "home", dynamicprefix.AnnotationSubnet: "svc"}},
		"spec": map[string]any{"nets": []any{"198.51.100.0/24"}},
	})
	apply(t, w, globalNetworkSetGVR, map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "GlobalNetworkSet",
		"metadata": map[string]any{"name": "feed", "labels": map[string]any{"feed": "blocklist"}},
		"spec":     map[string]any{"nets": []any{"203.0.113.0/24", "2001:db8:bad::/48"}},
	})

	// Every version of the three followed objects, from now on.
	var mu sync.Mutex
	var seen []allowEvent
	for _, gvr := range []schema.GroupVersionResource{poolGVR, networkSetGVR, globalNetworkSetGVR} {
		list, err := w.API.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wi, err := w.API.Dynamic.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(wi.Stop)
		go func() {
			for ev := range wi.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				rv, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
				e := allowEvent{rv: rv, object: gvr.Resource + "/" + u.GetName()}
				if gvr == poolGVR {
					e.entries = world.Blocks(u)
				} else {
					e.entries, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "nets")
				}
				mu.Lock()
				seen = append(seen, e)
				mu.Unlock()
			}
		}()
	}

	start := mark(t, w)
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")
	// pooled is what the status says is pooled: current and draining.
	pooled := func() []string {
		var out []string
		for _, h := range dpStatus(t, w, "home").History {
			if h.State != "expired" {
				out = append(out, h.Prefix)
			}
		}
		return out
	}
	follows := func(current netip.Prefix) []string {
		t.Helper()
		var p []string
		eventually(t, "the sets follow "+current.String(), func() (bool, string) {
			p = pooled()
			if dpStatus(t, w, "home").CurrentPrefix != current.String() || len(p) == 0 || p[0] != current.String() {
				return false, fmt.Sprint("pooled ", p)
			}
			wantLB, wantLAN, wantSvc := []string{"192.0.2.0/24"}, slices.Clone(userLAN), []string{"198.51.100.0/24"}
			for _, x := range p {
				wantLB, wantLAN, wantSvc = append(wantLB, x), append(wantLAN, x), append(wantSvc, subnetOf(x))
			}
			lb, lan, svc := blocks(t, w, "lb"), nets(t, w, networkSetGVR, "default", "lan"), nets(t, w, globalNetworkSetGVR, "", "svc")
			return slices.Equal(lb, wantLB) && slices.Equal(lan, wantLAN) && slices.Equal(svc, wantSvc),
				fmt.Sprintf("pooled %v: lb %v, lan %v, svc %v", p, lb, lan, svc)
		})
		return p
	}
	follows(prefixA)
	settleWrites()

	steps := []struct{ current, deprecated netip.Prefix }{{prefixB, prefixA}, {prefixC, prefixB}, {prefixD, prefixC}}
	var last []string
	for _, s := range steps {
		m := mark(t, w)
		advertise(t, w, s.current, s.deprecated)
		last = follows(s.current)
		settleWrites()
		want := []string{"patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200",
			"patch globalnetworksets svc 200", "patch networksets lan 200"}
		if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
			t.Errorf("renumbering to %s wrote %q, want %q (one write per object)", s.current, got, want)
		}
	}
	if len(last) > 3 || slices.Contains(last, prefixA.String()) {
		t.Errorf("after three renumberings with maxPrefixHistory 2, pooled %v: A's draining should have ended", last)
	}

	// Replay every stored version in the API server's order.
	mu.Lock()
	events := slices.Clone(seen)
	mu.Unlock()
	sort.Slice(events, func(i, j int) bool { return events[i].rv < events[j].rv })
	// Two promises: a prefix is in every allow-list before a pool holds it
	// (never later); an allow-list drops a prefix only when its draining ends,
	// in the pass where the pool drops it too (the pool's next version).
	state := map[string][]string{}
	v6 := func(es []string) []string {
		var out []string
		for _, e := range es {
			if p, err := netip.ParsePrefix(e); err == nil && p.Addr().Is6() && p != netip.MustParsePrefix("2001:db8:ffff::/64") {
				out = append(out, e)
			}
		}
		return out
	}
	allowed := map[string]bool{}   // "lan "+prefix, "svc "+prefix: held by that allow-list at some time
	dropped := map[string]uint64{} // prefix -> the version of an allow-list that dropped it
	for _, e := range events {
		prev := state[e.object]
		state[e.object] = e.entries
		lb, lan, svc := state["ciliumloadbalancerippools/lb"], state["networksets/lan"], state["globalnetworksets/svc"]
		for _, b := range v6(lan) {
			allowed["lan "+b] = true
		}
		for _, b := range v6(svc) {
			allowed["svc "+b] = true
		}
		if e.object != "ciliumloadbalancerippools/lb" {
			for _, b := range v6(prev) {
				if !slices.Contains(e.entries, b) {
					dropped[strings.TrimSuffix(b, "::1:0/112")+"::/64"] = e.rv // svc holds each prefix's subnet
				}
			}
		}
		for _, b := range v6(lb) {
			if !allowed["lan "+b] || !allowed["svc "+subnetOf(b)] {
				t.Errorf("at resource version %d the pool held %s before the allow-lists did: lan %v, svc %v", e.rv, b, lan, svc)
			}
		}
		if e.object == "ciliumloadbalancerippools/lb" {
			for b, rv := range dropped {
				if slices.Contains(e.entries, b) {
					t.Errorf("an allow-list dropped %s at resource version %d, and the pool still held it after (%d)", b, rv, e.rv)
				}
				delete(dropped, b)
			}
		}
		if lan != nil && !(slices.Contains(lan, "10.0.0.0/8") && slices.Contains(lan, "2001:db8:ffff::/64")) ||
			svc != nil && !slices.Contains(svc, "198.51.100.0/24") {
			t.Errorf("at resource version %d a user's net was missing: lan %v, svc %v", e.rv, lan, svc)
		}
	}
	if len(events) < 8 {
		t.Errorf("the watches saw %d versions, want every write's", len(events))
	}

	// Released: the user's nets only, and no record.
	if err := w.API.Dynamic.Resource(api.GVR).Delete(ctx, "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the sets released", func() (bool, string) {
		lan, err := w.API.Dynamic.Resource(networkSetGVR).Namespace("default").Get(ctx, "lan", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		l, _, _ := unstructured.NestedStringSlice(lan.Object, "spec", "nets")
		svc := nets(t, w, globalNetworkSetGVR, "", "svc")
		_, record := lan.GetAnnotations()[dynamicprefix.AnnotationManagedCIDRs]
		return slices.Equal(l, userLAN) && slices.Equal(svc, []string{"198.51.100.0/24"}) && !record,
			fmt.Sprintf("lan %v (record %v), svc %v", l, record, svc)
	})
	for _, wr := range writesBy(t, w, start, writerUser) {
		if wr.Name == "feed" {
			t.Errorf("the writer wrote the set that follows nothing: %s", wr)
		}
	}
	if got := nets(t, w, globalNetworkSetGVR, "", "feed"); !slices.Equal(got, []string{"203.0.113.0/24", "2001:db8:bad::/48"}) {
		t.Errorf("feed: %v", got)
	}
}
