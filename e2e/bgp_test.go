package e2e

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

var advertGVR = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumbgpadvertisements"}

// TestBGPAdvertisementLifecycle: an advertised subnet gets a
// CiliumBGPAdvertisement with the selector of the pool using it and the
// subnet's community; it follows a selector change and is deleted when the
// subnet stops being advertised.
func TestBGPAdvertisementLifecycle(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{
		"subnets": []any{map[string]any{"name": "public", "offset": 1, "prefixLength": 120,
			"bgp": map[string]any{"advertise": true, "community": "65000:100"}}},
	})
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "public", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "public"}},
		"spec": map[string]any{"serviceSelector": map[string]any{"matchLabels": map[string]any{"expose": "public"}}},
	})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	selector := func() (string, string) {
		u, err := w.API.Dynamic.Resource(advertGVR).Get(ctx, "home-public", metav1.GetOptions{})
		if err != nil {
			return "", err.Error()
		}
		ads, _, _ := unstructured.NestedSlice(u.Object, "spec", "advertisements")
		if len(ads) != 1 {
			return "", fmt.Sprint(ads)
		}
		a := ads[0].(map[string]any)
		sel, _, _ := unstructured.NestedString(a, "selector", "matchLabels", "expose")
		comm, _, _ := unstructured.NestedStringSlice(a, "attributes", "communities", "standard")
		return sel, fmt.Sprintf("%v %v %v", a["advertisementType"], comm, u.GetLabels()["advertise"])
	}
	eventually(t, "advertisement created", func() (bool, string) {
		sel, rest := selector()
		return sel == "public" && rest == "Service [65000:100] bgp", sel + " " + rest
	})
	eventually(t, "status names it", func() (bool, string) {
		st := dpStatus(t, w, "home")
		ready := false
		for _, c := range st.Conditions {
			ready = ready || (c.Type == "BGPAdvertisementReady" && c.Status == "True")
		}
		return len(st.Subnets) == 1 && st.Subnets[0].BGPAdvertisement == "home-public" && ready, fmt.Sprint(st.Subnets)
	})

	patch := []byte(`{"spec":{"serviceSelector":{"matchLabels":{"expose":"internet"}}}}`)
	if _, err := w.API.Dynamic.Resource(poolGVR).Patch(ctx, "public", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "advertisement follows the pool's selector", func() (bool, string) {
		sel, rest := selector()
		return sel == "internet", sel + " " + rest
	})

	stop := []byte(`{"spec":{"subnets":[{"name":"public","offset":1,"prefixLength":120,"bgp":{"advertise":false}}]}}`)
	if _, err := w.API.Dynamic.Resource(dynamicprefix.GVR).Patch(ctx, "home", types.MergePatchType, stop, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "advertisement deleted", func() (bool, string) {
		_, err := w.API.Dynamic.Resource(advertGVR).Get(ctx, "home-public", metav1.GetOptions{})
		return err != nil, fmt.Sprint(err)
	})
}
