package e2e

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
)

// TestTheWritersSiblingsOfANestedDrainAreAdmitted: while a DHCPv6-PD
// delegation drains around the current one (the /56 delegated before, the
// /60 of it now), a sibling over the whole /56 would lie over the current
// prefix too (red team r10a), so renumber-writer-values refuses it; the
// writer renders the draining /56 as its parts outside the current /60
// (backends.RenderCalico), and each, created as the writer creates a
// sibling, is admitted.
func TestTheWritersSiblingsOfANestedDrainAreAdmitted(t *testing.T) {
	const current, around = "2001:db8:1:10::/60", "2001:db8:1::/56"
	s := stealOnCalicoPD(t, current)
	// The status the writer's passes write for it
	// (TestRT10AGhostSiblingOverTheCurrentPrefixInsideADrainingDelegation).
	if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(s.ctx, "home", types.MergePatchType, []byte(`{"status":{"currentPrefix":"`+current+`","history":[`+
		`{"prefix":"`+current+`","state":"active","acquiredAt":"2026-11-29T02:00:00Z"},`+
		`{"prefix":"`+around+`","state":"draining","acquiredAt":"2026-11-29T01:00:00Z","deprecatedAt":"2026-11-29T02:00:00Z","expiresAt":"2026-11-29T03:00:00Z"}]}}`),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	live := s.read(t, ippoolGVR, "", "home-v6")
	pool, err := backends.ReadIPPool(live)
	if err != nil {
		t.Fatal(err)
	}
	// As apply.IPPools creates a sibling.
	object := func(p backends.CalicoPool) map[string]any {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": p.Name}, "spec": p.Spec}}
		u.SetLabels(p.Labels)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: live.GetAPIVersion(), Kind: live.GetKind(), Name: live.GetName(), UID: live.GetUID()}})
		return u.Object
	}
	plan := backends.RenderCalico(pool.(*backends.IPPool), "home", []string{current, around})
	var cidrs []any
	for _, p := range plan.Siblings {
		cidrs = append(cidrs, p.Spec["cidr"])
		if admittedWithin(s, ippoolGVR, object(p)) == nil {
			_, err := s.writer.Resource(ippoolGVR).Create(s.ctx, &unstructured.Unstructured{Object: object(p)}, metav1.CreateOptions{})
			t.Errorf("the writer's sibling %s over the draining %s, outside the current %s, refused: %v", p.Spec["cidr"], around, current, err)
		}
	}
	if len(cidrs) != 4 {
		t.Errorf("the writer rendered siblings over %v for %s draining around %s: want its four parts outside it", cidrs, around, current)
	}
	whole := backends.CalicoPool{Name: backends.CalicoSiblingName("home-v6", around), Labels: plan.Siblings[0].Labels, Spec: map[string]any{}}
	for k, v := range plan.Siblings[0].Spec {
		whole.Spec[k] = v
	}
	whole.Spec["cidr"] = around
	if err := refusedSoon(s, ippoolGVR, object(whole)); !denied(err) {
		t.Errorf("a sibling of home-v6 over the whole draining %s, around the current %s: %s", around, current, errString(err))
	}
}

// stealOnCalicoPD is stealWriterToken's world with home acquiring by
// DHCPv6-PD (delegations nest: /48 to /64) and Calico served; with pool
// set, the IPPool home-v6 follows home over it.
func stealOnCalicoPD(t *testing.T, pool string) stolen {
	t.Helper()
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"dhcpv6pd": map[string]any{"interface": "wan"}}})
	if err := s.w.API.InstallCalico(s.ctx); err != nil {
		t.Fatal(err)
	}
	if pool != "" {
		apply(t, s.w, ippoolGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": "home-v6", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
			"spec":     map[string]any{"cidr": pool, "vxlanMode": "Always", "blockSize": int64(122)}})
	}
	return s
}
