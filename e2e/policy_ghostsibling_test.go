package e2e

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestASiblingOfAPoolThatDoesNotExistCopiesNothing (seventh red team, r7b):
// renumber-writer-siblings holds a sibling to the pool its
// dynamic-prefix.io/sibling-of label names - but only that pool, as the
// policy's param, constrains it, and the binding allows where no param
// matches (parameterNotFoundAction: Allow; each IPPool is a param, and a
// sibling of one that does not exist is constrained by none).
// renumber-writer-owned asks only that the sibling be named after, labelled
// sibling-of and owned by an IPPool of that name - not that it exist (CEL
// cannot look). So a stolen writer token creates a disabled "sibling" of a
// pool "ghost", labelled home, over home's current prefix, with any
// setting: natOutgoing (Felix masquerades the traffic of every address in
// an IPPool with natOutgoing, disabled or not: home's pods NATed to the
// node's address), a nodeSelector, ipipMode. The garbage collector deletes
// it (its owner does not exist) and the writer at its next pass
// (deleteSiblings), but the token creates it again at will - r6b's fix
// (a sibling copies only a pool that follows its DynamicPrefix) answers
// the pool that exists and follows nothing, not the one that does not
// exist.
func TestASiblingOfAPoolThatDoesNotExistCopiesNothing(t *testing.T) {
	s := calicoPoolsUnderAStolenToken(t)
	ghost := func(name string, spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": name, "labels": map[string]any{"app.kubernetes.io/managed-by": "renumber",
				"dynamic-prefix.io/name": "home", "dynamic-prefix.io/sibling-of": "ghost"},
				"ownerReferences": []any{map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool", "name": "ghost",
					"uid": string(types.UID("00000000-0000-0000-0000-000000000001"))}}},
			"spec": spec}
	}
	// The siblings policy refuses the same settings as a sibling of a pool
	// that exists and follows nothing (r6b's fix), once its params are read.
	pool := s.read(t, ippoolGVR, "", "default-ipv6-ippool")
	fake := ghost("default-ipv6-ippool-2001-db8-1---64", map[string]any{"cidr": "2001:db8:1::/64", "disabled": true, "natOutgoing": true})
	fake["metadata"].(map[string]any)["labels"].(map[string]any)["dynamic-prefix.io/sibling-of"] = "default-ipv6-ippool"
	fake["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"name": "default-ipv6-ippool", "uid": string(pool.GetUID())}}
	if err := refusedSoon(s, ippoolGVR, fake); !denied(err) {
		t.Fatalf("the siblings policy did not refuse a sibling of default-ipv6-ippool, which follows nothing: %s", errString(err))
	}
	for name, spec := range map[string]map[string]any{
		"natOutgoing over home's current prefix": {"cidr": "2001:db8:1::/64", "disabled": true, "natOutgoing": true},
		"ipip and a node selector over home's current prefix": {"cidr": "2001:db8:1::/64", "disabled": true, "ipipMode": "Always",
			"nodeSelector": "kubernetes.io/hostname == 'nobody'", "disableBGPExport": true},
	} {
		if err := refusedSoon(s, ippoolGVR, ghost("ghost-2001-db8-1---64", spec)); !denied(err) {
			t.Errorf("a disabled sibling labelled home of an IPPool that does not exist, %s: %s", name, errString(err))
		}
	}
}
