package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/tools/world"
)

var ippoolGVR = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: backends.CalicoResource}

// ippools returns name -> "cidr" (", disabled" for a disabled pool).
func ippools(t *testing.T, w *world.World) map[string]string {
	t.Helper()
	list, err := w.API.Dynamic.Resource(ippoolGVR).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range list.Items {
		cidr, _, _ := unstructured.NestedString(u.Object, "spec", "cidr")
		if d, _, _ := unstructured.NestedBool(u.Object, "spec", "disabled"); d {
			cidr += ", disabled"
		}
		out[u.GetName()] = cidr
	}
	return out
}

// TestCalicoIPPools, on Calico's real IPPool CRD: the annotated pool holds the
// current prefix, each draining prefix a disabled sibling copying its
// settings; a prefix coming back (A->B->A) moves into the annotated pool after
// its sibling is deleted and before the new sibling is created, so no two
// pools ever hold one CIDR; deleting the DynamicPrefix deletes the siblings
// and our record, and leaves the user's pools' CIDRs.
func TestCalicoIPPools(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	if err := w.API.InstallCalico(ctx); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{})
	for name, pool := range map[string]map[string]any{
		"home-v6": {"metadata": map[string]any{"annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
			"spec": map[string]any{"cidr": "2001:db8:ffff::/64", "blockSize": 122, "natOutgoing": false, "nodeSelector": "all()"}},
		"default-ipv4": {"spec": map[string]any{"cidr": "192.168.0.0/16", "natOutgoing": true}},
	} {
		pool["apiVersion"], pool["kind"] = "crd.projectcalico.org/v1", "IPPool"
		md, _ := pool["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
		}
		md["name"], pool["metadata"] = name, md
		apply(t, w, ippoolGVR, pool)
	}
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")
	poolsAre := func(want map[string]string) {
		t.Helper()
		eventually(t, fmt.Sprint(want), func() (bool, string) {
			got := ippools(t, w)
			return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got)
		})
	}
	sibling := func(p fmt.Stringer) string { return backends.CalicoSiblingName("home-v6", p.String()) }
	a, b := prefixA.String(), prefixB.String()

	poolsAre(map[string]string{"default-ipv4": "192.168.0.0/16", "home-v6": a})
	settleWrites()

	m := mark(t, w)
	advertise(t, w, prefixB, prefixA)
	poolsAre(map[string]string{"default-ipv4": "192.168.0.0/16", "home-v6": b, sibling(prefixA): a + ", disabled"})
	settleWrites()
	want := []string{"create ippools " + sibling(prefixA) + " 201", "patch dynamicprefixes/status home 200", "patch ippools home-v6 200"}
	if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
		t.Errorf("A->B wrote %q, want %q", got, want)
	}
	u, err := w.API.Dynamic.Resource(ippoolGVR).Get(ctx, sibling(prefixA), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bs, _, _ := unstructured.NestedInt64(u.Object, "spec", "blockSize"); bs != 122 || len(u.GetOwnerReferences()) != 1 || u.GetOwnerReferences()[0].Name != "home-v6" {
		t.Errorf("sibling: blockSize %d, owners %v: want the annotated pool's settings and it as owner", bs, u.GetOwnerReferences())
	}

	m = mark(t, w)
	advertise(t, w, prefixA, prefixB)
	poolsAre(map[string]string{"default-ipv4": "192.168.0.0/16", "home-v6": a, sibling(prefixB): b + ", disabled"})
	settleWrites()
	var order []string
	for _, wr := range writesBy(t, w, m, writerUser) {
		if wr.Resource == backends.CalicoResource {
			order = append(order, wr.Verb+" "+wr.Name)
		}
	}
	want = []string{"delete " + sibling(prefixA), "patch home-v6", "create " + sibling(prefixB)}
	if !slices.Equal(order, want) {
		t.Errorf("A comes back: IPPool writes in the order %q, want %q (never two pools with one CIDR)", order, want)
	}

	m = mark(t, w)
	if err := w.API.Dynamic.Resource(api.GVR).Delete(ctx, "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poolsAre(map[string]string{"default-ipv4": "192.168.0.0/16", "home-v6": a})
	eventually(t, "record released", func() (bool, string) {
		u, err := w.API.Dynamic.Resource(ippoolGVR).Get(ctx, "home-v6", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, has := u.GetAnnotations()[backends.CalicoRecordKey]
		return !has && u.GetAnnotations()[dynamicprefix.AnnotationName] == "home", fmt.Sprint(u.GetAnnotations())
	})
	settleWrites()
	want = []string{"delete ippools " + sibling(prefixB) + " 200", "patch ippools home-v6 200"}
	if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
		t.Errorf("releasing wrote %q, want %q", got, want)
	}
}

// TestCalicoFlapUnderATightBudget: a flap (A->B->A->B, then B->C, C->D)
// with a budget of one write per IPPool, then one every 10 s, and no free
// decisions, so the breaker refuses writes mid-sequence. Every IPPool event the API server
// sends is checked: no two pools ever hold one CIDR; each step completes.
func TestCalicoFlapUnderATightBudget(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	if err := w.API.InstallCalico(ctx); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"maxPrefixHistory": 1}})
	apply(t, w, ippoolGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "home-v6", "annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec":     map[string]any{"cidr": "2001:db8:ffff::/64", "blockSize": 122}})
	watch, err := w.API.Dynamic.Resource(ippoolGVR).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	var mu sync.Mutex
	var shared []string
	go func() {
		held := map[string]string{}
		for ev := range watch.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if ev.Type == "DELETED" {
				delete(held, u.GetName())
			} else {
				held[u.GetName()], _, _ = unstructured.NestedString(u.Object, "spec", "cidr")
			}
			by := map[string]string{}
			for name, cidr := range held {
				if other, ok := by[cidr]; ok {
					mu.Lock()
					shared = append(shared, fmt.Sprintf("%s and %s hold %s", name, other, cidr))
					mu.Unlock()
				}
				by[cidr] = name
			}
		}
	}()
	startAgent(t, w, "node1")
	// No decision is free (--budget-decision-burst 0): every write counts,
	// so the breaker refuses mid-sequence.
	startWriter(t, w, "writer-a", "--budget-object-burst", "1", "--budget-object-per-minute", "6", "--budget-decision-burst", "0")
	sibling := func(p netip.Prefix) string { return backends.CalicoSiblingName("home-v6", p.String()) }
	prefixD := netip.MustParsePrefix("2001:db8:4:400::/64")
	for _, step := range [][]netip.Prefix{{prefixA}, {prefixB, prefixA}, {prefixA, prefixB}, {prefixB, prefixA}, {prefixC, prefixB}, {prefixD, prefixC}} {
		advertise(t, w, step[0], step[1:]...)
		want := map[string]string{"home-v6": step[0].String()}
		if len(step) > 1 {
			want[sibling(step[1])] = step[1].String() + ", disabled"
		}
		// A step completes when the pools and the status both hold it: a
		// status write the budget refused leaves the writer's record of the
		// current prefix behind, and the next step would not drain it.
		eventuallyWithin(t, 90*time.Second, fmt.Sprint(want), func() (bool, string) {
			got := ippools(t, w)
			cur := dpStatus(t, w, "home").CurrentPrefix
			return fmt.Sprint(got) == fmt.Sprint(want) && cur == step[0].String(), fmt.Sprint(got) + " current " + cur
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(shared) > 0 {
		t.Errorf("two IPPools with one CIDR: %q", shared)
	}
}
