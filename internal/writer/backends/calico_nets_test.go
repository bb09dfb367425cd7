package backends

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

type servedList map[string][]string // group/version -> resources

func (s servedList) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	list := &metav1.APIResourceList{GroupVersion: gv}
	for _, r := range s[gv] {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r})
	}
	return list, nil
}

func networkSet(annotations map[string]string, nets any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "NetworkSet",
		"spec": map[string]any{"nets": nets},
	}}
	u.SetNamespace("home")
	u.SetName("lan")
	u.SetResourceVersion("7")
	u.SetAnnotations(annotations)
	return u
}

func TestNetworkSetsAreFollowedAsCIDRGroupsAre(t *testing.T) {
	kinds, err := CalicoNetworkSetKinds(servedList{"crd.projectcalico.org/v1": {"ippools", "networksets", "globalnetworksets"}})
	if err != nil || len(kinds) != 2 {
		t.Fatalf("kinds: %v, %v", kinds, err)
	}
	set, global := kinds[0], kinds[1]
	if set.Name != "NetworkSet" || !set.Namespaced || global.Name != "GlobalNetworkSet" || global.Namespaced {
		t.Errorf("kinds: %+v, %+v", set, global)
	}
	for _, k := range kinds {
		if !k.AllowList || k.RecordKey != dynamicprefix.AnnotationManagedCIDRs {
			t.Errorf("%s: an allow-list with the managed-cidrs record, got %+v", k.Name, k)
		}
	}

	u := networkSet(map[string]string{dynamicprefix.AnnotationName: "home",
		dynamicprefix.AnnotationManagedCIDRs: "2001:db8:1::/64"}, []any{"198.51.100.0/24", "2001:db8:1::/64"})
	o, ours, err := set.Decode(u)
	if err != nil || !ours || o.Follow.DynamicPrefix != "home" || !slices.Equal(o.Entries, []string{"198.51.100.0/24", "2001:db8:1::/64"}) ||
		!slices.Equal(o.Record.Entries, []string{"2001:db8:1::/64"}) {
		t.Errorf("Decode = %+v, %v, %v", o, ours, err)
	}
	spec, err := set.Spec("", []string{"198.51.100.0/24", "2001:db8:2::/64"})
	if err != nil || !SameJSON(spec, map[string]any{"nets": []any{"198.51.100.0/24", "2001:db8:2::/64"}}) {
		t.Errorf("Spec = %v, %v", spec, err)
	}

	if kinds, err := CalicoNetworkSetKinds(servedList{"crd.projectcalico.org/v1": {"ippools"}}); err != nil || len(kinds) != 0 {
		t.Errorf("without the CRDs: %v, %v; want none", kinds, err)
	}
	for _, bad := range []any{"2001:db8::/64", []any{42}, map[string]any{}} {
		if _, _, err := set.Decode(networkSet(map[string]string{dynamicprefix.AnnotationName: "home"}, bad)); err == nil {
			t.Errorf("nets %#v: no error", bad)
		}
	}
}

// TestOnlyFollowersAreCachedWhole: the informers keep of any other object
// its name and resource version - a threat feed's network set of thousands
// of nets costs the writer nothing.
func TestOnlyFollowersAreCachedWhole(t *testing.T) {
	kinds, _ := CalicoNetworkSetKinds(servedList{"crd.projectcalico.org/v1": {"networksets"}})
	k := kinds[0]
	feed := networkSet(nil, []any{"203.0.113.0/24", "2001:db8:bad::/48"})
	feed.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
	got, _ := k.Slim(feed)
	u := got.(*unstructured.Unstructured)
	if _, found := u.Object["spec"]; found || u.GetName() != "lan" || u.GetNamespace() != "home" || u.GetResourceVersion() != "7" {
		t.Errorf("another's set cached as %v", u.Object)
	}
	if _, ours, _ := k.Decode(u); ours {
		t.Error("the slim copy reads as ours")
	}

	for _, ann := range []map[string]string{
		{dynamicprefix.AnnotationName: "home"},
		{dynamicprefix.AnnotationManagedCIDRs: "2001:db8:1::/64"}, // released: its record is still to remove
	} {
		set := networkSet(ann, []any{"2001:db8:1::/64"})
		set.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
		got, _ := k.Slim(set)
		u := got.(*unstructured.Unstructured)
		if nets, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "nets"); len(nets) != 1 || u.GetManagedFields() != nil {
			t.Errorf("%v: cached as %v", ann, u.Object)
		}
	}
}

// TestAPassWritesAllowListsBeforePools: a prefix is in every allow-list
// before any pool hands an address out of it.
func TestAPassWritesAllowListsBeforePools(t *testing.T) {
	sets, _ := CalicoNetworkSetKinds(servedList{"crd.projectcalico.org/v1": {"networksets", "globalnetworksets"}})
	cilium, _ := CiliumKinds(servedList{"cilium.io/v2": {PoolResource, "ciliumcidrgroups"}})
	metallb, _ := MetalLBKinds(servedList{"metallb.io/v1beta1": {MetalLBResource}})
	var pools []Cached
	for _, k := range slices.Concat(cilium, metallb, sets, []*Kind{NetworkPolicyKind()}) {
		pools = append(pools, Cached{Kind: k})
	}
	names := func(cs []Cached) (out []string) {
		for _, c := range cs {
			out = append(out, c.Kind.Name)
		}
		return out
	}
	cluster, namespaced, others := SplitAllowLists(pools)
	if got, want := names(cluster), []string{"CiliumCIDRGroup", "GlobalNetworkSet"}; !slices.Equal(got, want) {
		t.Errorf("cluster-scoped allow-lists %q, want %q", got, want)
	}
	if got, want := names(namespaced), []string{"NetworkSet", "NetworkPolicy"}; !slices.Equal(got, want) {
		t.Errorf("namespaced (a tenant's) allow-lists %q, want %q", got, want)
	}
	if got, want := names(others), []string{"CiliumLoadBalancerIPPool", "IPAddressPool"}; !slices.Equal(got, want) {
		t.Errorf("the others %q, want %q", got, want)
	}
}
