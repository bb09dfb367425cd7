package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// Found by the red team on issue 42 ("one tenant"): a tenant creates, in its own namespace,
// a NetworkPolicy that follows the cluster's DynamicPrefix "home" and whose
// one ingress rule repeats the current prefix as an ipBlock peer 70 times.
// The slim cache keeps one ipBlock per distinct CIDR (so the policy is well
// under 64 KiB there), but the writer's patch is built from the live object
// (Place) and carries all 70 peers (+ the new prefix). The shipped
// renumber-writer-sizes policy (branch issue42-policy: 64 ipBlock peers a
// rule) - or, on main, the pools policy's O(n^2) CEL running out of its cost
// budget for tens of thousands of peers - refuses it as Forbidden. The writer
// treats Forbidden as transient and, because NetworkPolicy is an allow-list
// kind, writes no other pool and no Service while any allow-list is "to be
// retried": one tenant's object held back the renumbering of every pool and
// every Service of every other tenant, for ever. A refusal for its size is
// now final for that object, and a namespaced allow-list holds back only
// itself.
//
// The reactor below stands in for the admission refusal (the same error the
// API server returns for a VAP denial with reason Forbidden).
func TestOneTenantsRefusedNetworkPolicyHoldsNobodyBack(t *testing.T) {
	f := converged(t, generous)
	npGVR := schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: backends.NetworkPolicyResource}
	var peers []any
	for range 70 {
		peers = append(peers, map[string]any{"ipBlock": map[string]any{"cidr": prefixA}})
	}
	np := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"namespace": "tenant", "name": "mine", "resourceVersion": "1",
			"annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec": map[string]any{"podSelector": map[string]any{}, "ingress": []any{map[string]any{"from": peers}}},
	}}
	if _, err := f.dyn.Resource(npGVR).Namespace("tenant").Create(t.Context(), np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kind := backends.NetworkPolicyKind()
	store := backends.NewCache(kind)
	if err := store.Add(np); err != nil {
		t.Fatal(err)
	}
	f.allowLists = []backends.Cached{{Kind: kind, Store: store}}
	f.dyn.PrependReactor("patch", backends.NetworkPolicyResource, func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}, "mine",
			fmt.Errorf("ValidatingAdmissionPolicy 'renumber-writer-sizes' with binding 'renumber-writer-sizes' denied request: "+
				"the writer may write only NetworkPolicies of at most 64 rules a direction, 64 ipBlock peers a rule, 256 a direction and 32 excepts an ipBlock"))
	})

	// The router renumbers A -> B; every node reports it.
	f.report(3, prefixB, prefixA)
	renumbersDespite(t, f, "one tenant's refused NetworkPolicy")
}

// The same stall without any admission policy (red team, issue 42). The tenant keeps
// editing its own following NetworkPolicy (a label, an annotation, every few
// hundred milliseconds - nothing the API server limits). The writer reads the
// policy live at the version its cache holds (Place) and calls any other
// version a conflict, which is transient: while the tenant edits faster than
// the cache catches up and the pass is retried, no pool and no Service of the
// DynamicPrefix got the new prefix. Its own retries are its own now.
func TestATenantEditingItsNetworkPolicyHoldsNobodyBack(t *testing.T) {
	f := converged(t, generous)
	npGVR := schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: backends.NetworkPolicyResource}
	np := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"namespace": "tenant", "name": "mine", "resourceVersion": "1",
			"annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec": map[string]any{"podSelector": map[string]any{}, "ingress": []any{map[string]any{"from": []any{
			map[string]any{"ipBlock": map[string]any{"cidr": prefixA}}}}}},
	}}
	if _, err := f.dyn.Resource(npGVR).Namespace("tenant").Create(t.Context(), np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kind := backends.NetworkPolicyKind()
	store := backends.NewCache(kind)
	if err := store.Add(np.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	f.allowLists = []backends.Cached{{Kind: kind, Store: store}}
	// The tenant's edits: by the time the writer reads the policy, it is a
	// version newer than the one its cache shows (the cache catches up
	// between passes, and the tenant edits again).
	rv := 1
	f.dyn.PrependReactor("get", backends.NetworkPolicyResource, func(clienttesting.Action) (bool, runtime.Object, error) {
		rv++
		live := np.DeepCopy()
		live.SetResourceVersion(fmt.Sprint(rv))
		live.SetLabels(map[string]string{"touched": fmt.Sprint(rv)})
		cached := np.DeepCopy()
		cached.SetResourceVersion(fmt.Sprint(rv - 1))
		_ = store.Update(cached) // the cache has seen the previous edit
		return true, live, nil
	})
	f.report(3, prefixB, prefixA)
	renumbersDespite(t, f, "a tenant editing its own NetworkPolicy")
}

// renumbersDespite runs five passes of f's renumbering from A to B and
// checks that the cluster's pool and Service got B despite what held them
// back before.
func renumbersDespite(t *testing.T, f *fixture, despite string) {
	t.Helper()
	for pass := range 5 {
		f.writes = nil
		o := f.ctl.Sync(t.Context(), passHome)
		t.Logf("pass %d: retry=%v err=%v wrote=%q", pass, o.Retry, o.Err, f.writes)
		f.catchUp()
	}
	blocks, _ := f.pool()
	if !slices.ContainsFunc(blocks, func(b string) bool { return strings.HasPrefix(b, "2001:db8:b:") }) {
		t.Errorf("after 5 passes pool lb holds %q: %s held the renumbering to B back", blocks, despite)
	}
	if ips := f.service()[holdings.AnnotationIPs]; !strings.Contains(ips, "2001:db8:b:") {
		t.Errorf("after 5 passes Service default/web's addresses are %q: %s held the renumbering to B back", ips, despite)
	}
}
