package e2e

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestASiblingCopiesOnlyAPoolThatFollowsItsDynamicPrefix (sixth red team,
// r6b): the writer renders a sibling IPPool only of the user's pool that
// follows the DynamicPrefix the sibling is labelled with (RenderCalico), and
// renumber-writer-siblings holds its settings to that pool's - but nothing
// asks whether the pool it copies follows that DynamicPrefix at all.
// renumber-writer-owned asks only that it be named after, labelled
// sibling-of and owned by some IPPool; renumber-writer-values checks its
// CIDR against the DynamicPrefix its label names. So a stolen writer token
// creates a disabled "sibling" of the cluster's default pool, which follows
// nothing and has natOutgoing, with home's current prefix as its CIDR:
// Felix masquerades traffic from every address in an IPPool with
// natOutgoing, disabled or not (a disabled pool only allocates nothing - the
// writer's own draining siblings rely on it), so the pods on home's prefix,
// whose pool home-v6 has natOutgoing off, have their traffic NATed to the
// node's address. Before the siblings policy, the same was refused only as
// a setting home-v6 does not have.
func TestASiblingCopiesOnlyAPoolThatFollowsItsDynamicPrefix(t *testing.T) {
	s := calicoPoolsUnderAStolenToken(t)
	var siblingFor func(dp, of, name string, spec map[string]any) map[string]any
	sibling := func(of, name string, spec map[string]any) map[string]any {
		return siblingFor("home", of, name, spec)
	}
	siblingFor = func(dp, of, name string, spec map[string]any) map[string]any {
		pool := s.read(t, ippoolGVR, "", of)
		return map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": name, "labels": map[string]any{"app.kubernetes.io/managed-by": "renumber",
				"dynamic-prefix.io/name": dp, "dynamic-prefix.io/sibling-of": of},
				"ownerReferences": []any{map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool", "name": of, "uid": string(pool.GetUID())}}},
			"spec": spec}
	}
	// The writer's own sibling of home-v6, for its draining prefix: admitted.
	honest := sibling("home-v6", "home-v6-2001-db8-2---64", map[string]any{"cidr": "2001:db8:2::/64", "disabled": true, "vxlanMode": "Always", "blockSize": int64(122)})
	if _, err := s.writer.Resource(ippoolGVR).Create(s.ctx, &unstructured.Unstructured{Object: honest}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the writer's sibling of home-v6: %v", err)
	}
	// A "sibling" of the default pool, labelled home, over home's current
	// prefix, with the default pool's natOutgoing.
	nat := sibling("default-ipv6-ippool", "default-ipv6-ippool-2001-db8-1---64", map[string]any{"cidr": "2001:db8:1::/64", "disabled": true, "natOutgoing": true})
	if err := refusedSoon(s, ippoolGVR, nat); !denied(err) {
		t.Errorf("a disabled sibling labelled home of default-ipv6-ippool, which follows nothing, over home's current prefix with natOutgoing: %s", errString(err))
	}
	// The writer deletes a sibling of home it does not render at its next
	// pass (deleteSiblings): the token recreates it at will. Labelled with a
	// DynamicPrefix that does not exist it is checked by no value policy and
	// deleted by nobody: the writer looks at the siblings of the
	// DynamicPrefixes there are, and the garbage collector at owners that
	// are gone - its owner, the default pool, is not.
	lasting := siblingFor("nosuch", "default-ipv6-ippool", "default-ipv6-ippool-2001-db8-1---64-x", map[string]any{"cidr": "2001:db8:1::/64", "disabled": true, "natOutgoing": true})
	if err := refusedSoon(s, ippoolGVR, lasting); !denied(err) {
		t.Errorf("a disabled sibling of default-ipv6-ippool labelled with a DynamicPrefix that does not exist, over home's current prefix with natOutgoing: %s", errString(err))
	}
}

// calicoPoolsUnderAStolenToken is stealWriterToken with Calico's CRDs and
// two IPPools: home-v6, which follows home (vxlan, natOutgoing off), and
// the cluster's default-ipv6-ippool, which follows nothing (natOutgoing).
func calicoPoolsUnderAStolenToken(t *testing.T) stolen {
	t.Helper()
	s := stealWriterToken(t, nil)
	if err := s.w.API.InstallCalico(s.ctx); err != nil {
		t.Fatal(err)
	}
	apply(t, s.w, ippoolGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "home-v6", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"cidr": "2001:db8:1::/64", "vxlanMode": "Always", "blockSize": int64(122)}})
	apply(t, s.w, ippoolGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "default-ipv6-ippool"},
		"spec":     map[string]any{"cidr": "fd00:10::/64", "natOutgoing": true}})
	return s
}
