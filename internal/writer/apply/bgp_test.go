package apply

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/model"
)

type ciliumServed struct{}

func (ciliumServed) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv != "cilium.io/v2" {
		return &metav1.APIResourceList{}, nil
	}
	return &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: backends.PoolResource}}}, nil
}

// poolsOnSubnet is a cache of CiliumLoadBalancerIPPools, each following
// home's subnet public with the serviceSelector given by its name.
func poolsOnSubnet(t *testing.T, selectors map[string]map[string]any) []backends.Cached {
	t.Helper()
	kinds, err := backends.CiliumKinds(ciliumServed{})
	if err != nil || len(kinds) == 0 {
		t.Fatalf("kinds %v, %v", kinds, err)
	}
	store := backends.NewCache(kinds[0])
	for name, sel := range selectors {
		spec := map[string]any{"blocks": []any{}}
		if sel != nil {
			spec["serviceSelector"] = sel
		}
		if err := store.Add(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
			"metadata": map[string]any{"name": name, "resourceVersion": "1", "annotations": map[string]any{
				dynamicprefix.AnnotationName: "home", dynamicprefix.AnnotationSubnet: "public"}},
			"spec": spec,
		}}); err != nil {
			t.Fatal(err)
		}
	}
	return []backends.Cached{{Kind: kinds[0], Store: store}}
}

// A subnet's one advertisement selects the Services of every pool that uses
// it: pools that share a selector give it; two that differ are an invalid
// setup naming both (found by the fourth red team: the writer rendered the
// first one's, which renumber-writer-advertised-services refused at every
// pass, and the other pool's Services went unannounced).
func TestTheAdvertisementsSelectorIsThePoolsOne(t *testing.T) {
	teamA := map[string]any{"matchLabels": map[string]any{"team": "a"}}
	teamB := map[string]any{"matchLabels": map[string]any{"team": "b"}}
	for _, tc := range []struct {
		name      string
		selectors map[string]map[string]any
		want      map[string]any
		found     bool
		invalid   bool
	}{
		{"no pool uses the subnet", nil, nil, false, false},
		{"one pool", map[string]map[string]any{"public-a": teamA}, teamA, true, false},
		{"two pools, one selector", map[string]map[string]any{"public-a": teamA, "public-b": teamA}, teamA, true, false},
		{"two pools, two selectors", map[string]map[string]any{"public-a": teamA, "public-b": teamB}, nil, true, true},
		{"a selector and none", map[string]map[string]any{"public-a": teamA, "public-b": nil}, nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := poolSelector(poolsOnSubnet(t, tc.selectors), "home", "public")
			if found != tc.found || errors.Is(err, model.ErrInvalid) != tc.invalid || (err != nil) != tc.invalid {
				t.Fatalf("found %v, err %v; want found %v, invalid %v", found, err, tc.found, tc.invalid)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("selector (-want +got):\n%s", diff)
			}
		})
	}
}
