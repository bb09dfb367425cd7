package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
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
	publicPool(t, w)
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
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, stop, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "advertisement deleted", func() (bool, string) {
		_, err := w.API.Dynamic.Resource(advertGVR).Get(ctx, "home-public", metav1.GetOptions{})
		return err != nil, fmt.Sprint(err)
	})
}

// TestBGPInstalledLater: a subnet asks for BGP on a cluster without Cilium's BGP
// CRD (a pool error, no crash); once the CRD is installed the running writer
// follows it and creates the advertisement, without a restart.
func TestBGPInstalledLater(t *testing.T) {
	w := newWorldWith(t, 1, false)
	ctx := t.Context()
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := world.CiliumCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.API.Apply(ctx, filepath.Join(dir, "ciliumloadbalancerippools.yaml"), filepath.Join(repo, "manifests", "crds", "dynamicprefixes.yaml")); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{
		"subnets": []any{map[string]any{"name": "public", "offset": 1, "prefixLength": 120, "bgp": map[string]any{"advertise": true}}},
	})
	publicPool(t, w)
	startAgent(t, w, "node1")
	writer := startWriter(t, w, "writer-a")
	bgpReady := func(status, text string) func() (bool, string) {
		return func() (bool, string) {
			for _, c := range dpStatus(t, w, "home").Conditions {
				if c.Type == "BGPAdvertisementReady" {
					return string(c.Status) == status && strings.Contains(c.Message, text), c.Message
				}
			}
			return false, "no condition"
		}
	}
	eventually(t, "BGPAdvertisementReady False: not served", bgpReady("False", "not served"))

	if err := w.API.Apply(ctx, filepath.Join(dir, "ciliumbgpadvertisements.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "advertisement created", func() (bool, string) {
		_, err := w.API.Dynamic.Resource(advertGVR).Get(ctx, "home-public", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	eventually(t, "BGPAdvertisementReady True", bgpReady("True", ""))
	waitLog(t, w, "writer-a.log", "CiliumBGPAdvertisement served; following it", 1)
	if got := countLog(w, "writer-a.log", "writer started"); got != 1 || !alive(writer.Process.Pid) {
		t.Errorf("writer started %d times, alive %v: the CRD must be picked up without a restart", got, alive(writer.Process.Pid))
	}
}

// publicPool creates pool "public", following subnet "public" of DynamicPrefix
// "home" and selecting the Services labelled expose=public.
func publicPool(t *testing.T, w *world.World) {
	t.Helper()
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "public", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "public"}},
		"spec": map[string]any{"serviceSelector": map[string]any{"matchLabels": map[string]any{"expose": "public"}}},
	})
}
