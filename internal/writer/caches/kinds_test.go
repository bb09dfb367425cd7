package caches

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backends"
)

func TestAPoolKindIsDroppedOnlyWhenDiscoveryAnswersWithoutIt(t *testing.T) {
	kind := &backends.Kind{Name: "IPAddressPool", GVR: schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}}
	var answer error = errors.New("the server is currently unable to handle the request")
	c := &Followed{log: slog.New(slog.NewTextHandler(io.Discard, nil)), dyn: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		discover: func() (backends.Discovered, error) { return backends.Discovered{}, answer }}
	c.pools = []*pooled{c.newPooled(kind)}

	if changed, err := c.updateKinds(t.Context()); changed || err == nil || len(c.Kinds()) != 1 {
		t.Errorf("discovery failed: changed %v, err %v, %d kinds; want the kind kept", changed, err, len(c.Kinds()))
	}
	answer = nil // the API server answers: MetalLB was uninstalled
	if changed, err := c.updateKinds(t.Context()); !changed || err != nil || len(c.Kinds()) != 0 {
		t.Errorf("kind gone: changed %v, err %v, %d kinds; want it dropped", changed, err, len(c.Kinds()))
	}
}

// TestAPoolKindIsListedOneSlimmedObjectAtATime: a pool kind's list asks for
// slimPage objects a request and keeps each page slimmed before asking for
// the next, so a tenant's objects of 1.5 MiB are never in memory whole but
// one at a time.
func TestAPoolKindIsListedOneSlimmedObjectAtATime(t *testing.T) {
	k := backends.NetworkPolicyKind()
	var objs []runtime.Object
	for i := range 3 {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"spec": map[string]any{"ingress": []any{map[string]any{"from": []any{
				map[string]any{"ipBlock": map[string]any{"cidr": "2001:db8:1::/64"}}, map[string]any{"podSelector": map[string]any{}}}}}}}}
		u.SetNamespace("home")
		u.SetName(fmt.Sprintf("p%d", i))
		u.SetAnnotations(map[string]string{dynamicprefix.AnnotationName: "home"})
		objs = append(objs, u)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{k.GVR: "NetworkPolicyList"}, objs...)
	var limits []int64
	client.PrependReactor("list", "networkpolicies", func(a clienttesting.Action) (bool, runtime.Object, error) {
		o := a.(clienttesting.ListActionImpl).ListOptions
		limits = append(limits, o.Limit)
		// The fake does not page: serve the page asked for by hand.
		i, _ := strconv.Atoi(o.Continue)
		if len(limits) > 10 {
			t.Fatalf("continue %q limit %d; limits %v", o.Continue, o.Limit, limits)
		}
		list := &unstructured.UnstructuredList{Object: map[string]any{}}
		list.Items = append(list.Items, *objs[i].(*unstructured.Unstructured).DeepCopy())
		if i+1 < len(objs) {
			list.SetContinue(strconv.Itoa(i + 1))
		}
		return true, list, nil
	})
	got, err := slimList(client.Resource(k.GVR).Namespace("home"), backends.Scope{}, k.Slim)(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(limits, []int64{slimPage, slimPage, slimPage}) {
		t.Errorf("list requests with limits %v, want 3 of %d", limits, slimPage)
	}
	items := got.(*unstructured.UnstructuredList).Items
	for _, o := range items {
		peers, _, _ := unstructured.NestedSlice(o.Object, "spec", "ingress")
		if len(peers) != 1 || len(peers[0].(map[string]any)["from"].([]any)) != 1 {
			t.Errorf("cached %v, want its one ipBlock", o.Object)
		}
	}
	if len(items) != 3 {
		t.Errorf("listed %d, want 3", len(items))
	}
}
