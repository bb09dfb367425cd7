package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/prefix"
	"github.com/renumber/renumber/internal/writer/service"
)

// TestReleasingWhatADynamicPrefixWrote: switching transition.mode from ha to
// simple releases the HA Services' addresses and targets; deleting the
// DynamicPrefix releases the pools and CIDR groups that name it and deletes its
// CiliumBGPAdvertisements. Each released object costs one write and one event;
// the user's entries and annotations stay; a writer started afterwards finds
// nothing to do.
func TestReleasingWhatADynamicPrefixWrote(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{
		"transition":    map[string]any{"mode": "ha"},
		"addressRanges": []any{map[string]any{"name": "lb", "start": "::f000:0:0:0", "end": "::ffff:ffff:ffff:ffff"}},
		"subnets": []any{map[string]any{"name": "public", "offset": 1, "prefixLength": 120,
			"bgp": map[string]any{"advertise": true}}},
	})
	publicPool(t, w)
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", "dynamic-prefix.io/address-range": "lb"}},
		"spec": map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}},
	})
	apply(t, w, groupGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "raw", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"externalCIDRs": []any{"198.51.100.0/24"}},
	})
	createService(t, w, "web", map[string]string{
		"dynamic-prefix.io/name": "home", service.AnnotationSuffix: "::ffff:0:1",
		service.AnnotationIPs: "192.0.2.7", service.AnnotationTarget: "web.example.org"})
	startAgent(t, w, "node1")
	writer := startWriter(t, w, "writer-a")
	a1, err := prefix.Splice(prefixA, netip.MustParseAddr("::ffff:0:1"))
	if err != nil {
		t.Fatal(err)
	}
	webIs := func(ips, target string) {
		t.Helper()
		eventually(t, "web: "+ips, func() (bool, string) {
			got, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			a := got.Annotations
			return a[service.AnnotationIPs] == ips && a[service.AnnotationTarget] == target && a["dynamic-prefix.io/name"] == "home",
				fmt.Sprint(a)
		})
	}
	poolsAre := func(b, c []string) {
		t.Helper()
		eventually(t, fmt.Sprintf("pools %v %v", b, c), func() (bool, string) {
			gb, gc := blocks(t, w, "lb"), cidrs(t, w, "raw")
			return slices.Equal(gb, b) && slices.Equal(gc, c), fmt.Sprintf("%v %v", gb, gc)
		})
	}
	webIs("192.0.2.7,"+a1.String(), "web.example.org,"+a1.String())
	eventually(t, "the advertisement", func() (bool, string) {
		_, err := w.API.Dynamic.Resource(advertGVR).Get(ctx, "home-public", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	poolsAre([]string{"192.0.2.0/24", rangeOf(prefixA.String())}, []string{"198.51.100.0/24", prefixA.String()})
	settleWrites()

	m := mark(t, w)
	simple := []byte(`{"spec":{"transition":{"mode":"simple"}}}`)
	if _, err := w.API.Dynamic.Resource(dynamicprefix.GVR).Patch(ctx, "home", types.MergePatchType, simple, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	webIs("192.0.2.7", "web.example.org")
	waitEvent(t, w, "ServiceReleased", "web")
	settleWrites()
	// Status records the new generation; the pools keep following.
	want := []string{"patch dynamicprefixes/status home 200", "patch services web 200"}
	if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
		t.Errorf("writes switching to simple: %q, want %q", got, want)
	}
	poolsAre([]string{"192.0.2.0/24", rangeOf(prefixA.String())}, []string{"198.51.100.0/24", prefixA.String()})

	m = mark(t, w)
	if err := w.API.Dynamic.Resource(dynamicprefix.GVR).Delete(ctx, "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poolsAre([]string{"192.0.2.0/24"}, []string{"198.51.100.0/24"})
	waitEvent(t, w, "PoolReleased", "lb")
	waitEvent(t, w, "PoolReleased", "raw")
	waitEvent(t, w, "PoolReleased", "public")
	waitEvent(t, w, "AdvertisementDeleted", "home-public")
	settleWrites()
	want = []string{"delete ciliumbgpadvertisements home-public 200", "patch ciliumcidrgroups raw 200",
		"patch ciliumloadbalancerippools lb 200", "patch ciliumloadbalancerippools public 200"}
	if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
		t.Errorf("writes deleting the DynamicPrefix: %q, want %q", got, want)
	}
	for name, gvr := range map[string]schema.GroupVersionResource{"lb": poolGVR, "raw": groupGVR} {
		a := get(t, w, gvr, name).GetAnnotations()
		_, blocks := a[dynamicprefix.AnnotationManagedBlock]
		_, cidrs := a[dynamicprefix.AnnotationManagedCIDRs]
		if a[dynamicprefix.AnnotationName] != "home" || blocks || cidrs {
			t.Errorf("%s annotations after release: %v; want the user's kept and no record of ours", name, a)
		}
	}
	if a := get(t, w, poolGVR, "lb").GetAnnotations(); a[dynamicprefix.AnnotationAddressRange] != "lb" {
		t.Errorf("lb lost the user's address-range annotation: %v", a)
	}

	// A new writer (a new leader term) finds nothing left to release.
	w.Stop(writer, 10*time.Second)
	m = mark(t, w)
	startWriter(t, w, "writer-a")
	waitLog(t, w, "writer-a.log", "writer started", 2)
	settleWrites()
	if got := objectWrites(writesBy(t, w, m, writerUser)); len(got) != 0 {
		t.Errorf("a writer started after the release wrote %q", got)
	}
}
