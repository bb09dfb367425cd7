package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/tools/world"
)

// TestPoolsOnACiliumThatServesOnlyV2alpha1 installs Cilium's pool CRD reduced to
// its v2alpha1 version (what Cilium 1.17 and older serve): the writer discovers
// that and fills the pool through v2alpha1.
func TestPoolsOnACiliumThatServesOnlyV2alpha1(t *testing.T) {
	w := newWorldWith(t, 1, false)
	ctx := t.Context()
	dir, err := world.CiliumCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ciliumloadbalancerippools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd["spec"].(map[string]any)
	var keep []any
	for _, v := range spec["versions"].([]any) {
		m := v.(map[string]any)
		if m["name"] == "v2alpha1" {
			m["storage"], m["served"] = true, true
			delete(m, "deprecated")
			delete(m, "deprecationWarning")
			keep = append(keep, m)
		}
	}
	spec["versions"] = keep
	out, _ := yaml.Marshal(crd)
	repo, _ := world.RepoRoot()
	if err := w.API.ApplyYAML(ctx, out); err != nil {
		t.Fatal(err)
	}
	if err := w.API.Apply(ctx, filepath.Join(repo, "manifests", "crds", "dynamicprefixes.yaml")); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixA)
	minimalDP(t, w, "home")
	v2alpha1 := schema.GroupVersionResource{Group: "cilium.io", Version: "v2alpha1", Resource: "ciliumloadbalancerippools"}
	apply(t, w, v2alpha1, map[string]any{
		"apiVersion": "cilium.io/v2alpha1", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}},
	})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")
	eventually(t, "v2alpha1 pool filled", func() (bool, string) {
		u := get(t, w, v2alpha1, "lb")
		var got []string
		bs, _ := u.Object["spec"].(map[string]any)["blocks"].([]any)
		for _, b := range bs {
			if c, ok := b.(map[string]any)["cidr"].(string); ok {
				got = append(got, c)
			}
		}
		return slices.Equal(got, []string{"192.0.2.0/24", prefixA.String()}), ""
	})
}
