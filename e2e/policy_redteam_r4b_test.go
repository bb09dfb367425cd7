package e2e

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// TestTheWritersAdvertisementIsAdmittedWhereTwoPoolsUseItsSubnet (fourth
// red team, direction b): the user gives subnet public two
// CiliumLoadBalancerIPPools (say one per team, each with its own
// serviceSelector, both annotated dynamic-prefix.io/name: home and
// dynamic-prefix.io/subnet: public). The writer renders the advertisement
// with the selector of the first pool by name (apply.poolSelector);
// renumber-writer-advertised-services (failurePolicy Fail, paramRef
// selector {}) holds it to every pool that follows the subnet, so no
// selector satisfies both: the writer's write is refused at every pass, and
// public is not advertised at all.
func TestTheWritersAdvertisementIsAdmittedWhereTwoPoolsUseItsSubnet(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"subnets": []any{
		map[string]any{"name": "public", "offset": 1, "prefixLength": 120, "bgp": map[string]any{"advertise": true, "community": "65000:100"}}}})
	home := s.read(t, api.GVR, "", "home")
	for _, team := range []string{"a", "b"} {
		apply(t, s.w, poolGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
			"metadata": map[string]any{"name": "public-" + team, "annotations": map[string]any{"dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "public"}},
			"spec":     map[string]any{"serviceSelector": map[string]any{"matchLabels": map[string]any{"team": team}}}})
	}
	// What the writer renders: the first pool's selector (public-a).
	a, err := backends.RenderAdvertisement("home", model.Subnet{Name: "public", Advertise: true, Community: "65000:100"},
		map[string]any{"matchLabels": map[string]any{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]any{}
	for k, v := range a.Labels {
		labels[k] = v
	}
	obj := map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
		"metadata": map[string]any{"name": a.Name, "labels": labels,
			"ownerReferences": []any{map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix", "name": "home", "uid": string(home.GetUID())}}},
		"spec": a.Spec}
	// A selector of neither pool is refused once the policy has its params.
	bare := (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
	bare["metadata"].(map[string]any)["name"] = "home-public-bare"
	bare["spec"].(map[string]any)["advertisements"].([]any)[0].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"team": "c"}}
	if err := refusedSoon(s, advertGVR, bare); !denied(err) {
		t.Fatalf("an advertisement with neither pool's selector: %s", errString(err))
	}
	// The writer's own, tried for 5 s while the informer sees both pools.
	for range 50 {
		if _, err := s.writer.Resource(advertGVR).Create(s.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the writer's advertisement for public (public-a's selector, as apply.poolSelector picks) refused: %v", err)
		}
		if err := s.w.API.Dynamic.Resource(advertGVR).Delete(s.ctx, a.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTheWriterIsNotStoppedByAConfirmerNamedAsItsOwnClient (fourth red team,
// direction a): one node, n1, runs the DHCPv6 client (nodeNames unset; the
// other nodes do not follow the PD interface, or have not joined). The
// stolen token writes status.dhcpv6pd {clientNode: n1, confirmerNode: n1}:
// renumber-writer-status admits it (nodeNames is unset, and no confirmer is
// dropped). On its next pass the writer names n1 client, finds no other
// node to confirm, and falls back to the confirmer the status named unless
// it is the client (decide.roles) - here it is, so it writes no confirmer;
// the rule that keeps a confirmer once named refuses that write, and every
// later one: the writer's status for home is stuck where the token left it.
func TestTheWriterIsNotStoppedByAConfirmerNamedAsItsOwnClient(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"dhcpv6pd": map[string]any{"interface": "wan"}}})
	if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(s.ctx, "home", types.MergePatchType, []byte(
		`{"status":{"currentPrefix":"2001:db8:1::/64","history":[{"prefix":"2001:db8:1::/64","state":"active","acquiredAt":"2026-11-29T00:00:00Z"}],`+
			`"dhcpv6pd":{"clientNode":"n1","validLifetime":3600}}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := s.patch(api.GVR, "", "home", `{"status":{"dhcpv6pd":{"confirmerNode":"n1"}}}`, "status"); err != nil {
		t.Fatalf("the token's write, n1 named its own confirmer, refused (then nothing here is a hole): %v", err)
	}
	dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
	if err != nil {
		t.Fatal(err)
	}
	m := model.Parse("home", dp.Spec)
	n1 := decide.Report{Node: "n1", Digest: digest.Node{Links: []digest.Link{{Name: "wan", Prefixes: []digest.Prefix{
		{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Sources: digest.SourcePD, Remaining: time.Hour}}}}}}
	st := render.Status(dp, m, decide.For(m, render.Prior(dp.Status), []decide.Report{n1}, passTime), render.Problems{}, passTime)
	if render.StatusEqual(st, dp.Status) {
		t.Fatal("the writer writes nothing: no hole here")
	}
	t.Logf("the writer's dhcpv6pd: %+v", st.DHCPv6PD)
	if err := s.writeStatus(t, dp.Status, st); err != nil {
		t.Errorf("the writer's status write after the token named n1 its own confirmer: %v", err)
	}
}
