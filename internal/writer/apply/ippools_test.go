package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
)

var gvr = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ippools"}

type events struct{}

func (events) Event(*unstructured.Unstructured, bool, string, string) bool { return true }

// world is the IPPools of an API server (the fake's tracker), the writer's
// cache of them, and every write the writer sent, checked as it is sent.
type world struct {
	t      *testing.T
	client *dynamicfake.FakeDynamicClient
	store  cache.Indexer // IPPools read (backends.NewIPPoolCache)
	w      *IPPools
	clock  *clocktesting.FakeClock
	writes int
	// fail, when > 0, fails the fail-th write from now with a conflict.
	fail int
	seen map[string]string // content by name, at the last sync
	rvs  map[string]string // resourceVersion by name
	rv   int
}

func newWorld(t *testing.T, limits permit.Limits) *world {
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "home-v6", "annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec":     map[string]any{"cidr": "2001:db8:ffff::/64", "blockSize": int64(122)},
	}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "IPPoolList"})
	if _, err := client.Resource(gvr).Create(context.Background(), parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	w := &world{t: t, client: client, clock: clk, store: backends.NewIPPoolCache(), seen: map[string]string{}, rvs: map[string]string{}}
	w.w = &IPPools{Gate: &permit.Gate{Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Events: &permit.Events{Recorder: events{}}, Breaker: permit.NewBreaker(limits), Requeue: func(string, time.Duration) {}}, Client: client}
	// Before every write: no two pools hold one CIDR (what the write before
	// left), then perhaps the failure asked for.
	client.PrependReactor("*", "ippools", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "list" || a.GetVerb() == "get" || a.GetVerb() == "watch" {
			return false, nil, nil
		}
		w.unique(fmt.Sprintf("before write %d (%s)", w.writes+1, a.GetVerb()))
		w.writes++
		if w.fail > 0 {
			if w.fail--; w.fail == 0 {
				return true, nil, apierrors.NewConflict(gvr.GroupResource(), "", fmt.Errorf("the object has been modified"))
			}
		}
		return false, nil, nil
	})
	w.sync()
	return w
}

// pools is what the API server holds: name -> CIDR.
func (w *world) pools() map[string]string {
	// The tracker itself: a reactor runs under the fake client's lock.
	o, err := w.client.Tracker().List(gvr, schema.GroupVersionKind{Group: gvr.Group, Version: gvr.Version, Kind: "IPPool"}, "")
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range o.(*unstructured.UnstructuredList).Items {
		out[u.GetName()], _, _ = unstructured.NestedString(u.Object, "spec", "cidr")
	}
	return out
}

func (w *world) unique(when string) {
	w.t.Helper()
	seen := map[string]string{}
	for name, cidr := range w.pools() {
		if other, ok := seen[cidr]; ok {
			w.t.Fatalf("%s: IPPools %s and %s both hold %s", when, name, other, cidr)
		}
		seen[cidr] = name
	}
}

// sync does what the API server and the informer do: an object whose
// content changed gets a new resourceVersion (the fake tracker gives none),
// and the cache shows what the API server holds.
func (w *world) sync() {
	list, err := w.client.Resource(gvr).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	items := make([]any, 0, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		u.SetResourceVersion("")
		content, err := json.Marshal(u)
		if err != nil {
			w.t.Fatal(err)
		}
		if w.seen[u.GetName()] != string(content) {
			w.seen[u.GetName()] = string(content)
			w.rv++
			w.rvs[u.GetName()] = fmt.Sprint(w.rv)
		}
		u.SetResourceVersion(w.rvs[u.GetName()])
		if err := w.client.Tracker().Update(gvr, u, ""); err != nil {
			w.t.Fatal(err)
		}
		items = append(items, u)
	}
	if err := w.store.Replace(items, ""); err != nil {
		w.t.Fatal(err)
	}
}

// pass runs one Sync for the pooled prefixes (current first), then lets the
// cache catch up, and returns the writes it sent and its error.
func (w *world) pass(pooled ...string) (int, error) {
	d := decide.Decision{}
	for _, p := range pooled {
		d.Pooled = append(d.Pooled, netip.MustParsePrefix(p))
	}
	d.Current = d.Pooled[0]
	before := w.writes
	out := w.w.Sync(context.Background(), backends.IPPools{Store: w.store}, gvr, model.Parse("home", dynamicprefix.Spec{}), d)
	w.sync()
	return w.writes - before, out.Err()
}

// settle runs passes until one writes nothing.
func (w *world) settle(pooled ...string) {
	w.t.Helper()
	for range 10 {
		n, err := w.pass(pooled...)
		if n == 0 && err == nil {
			return
		}
		w.clock.Step(time.Minute) // a refused permit comes back
	}
	w.t.Fatalf("no settling on %v: %v", pooled, w.pools())
}

const (
	a = "2001:db8:1:100::/64"
	b = "2001:db8:2:100::/64"
	c = "2001:db8:3:100::/64"
	d = "2001:db8:4:100::/64"
)

// flap is the sequence of the issue: A->B->A->B, then B->C, C->D, the
// draining prefix kept (pooled: current first).
var flap = [][]string{{a}, {b, a}, {a, b}, {b, a}, {c, b}, {d, c}}

func holds(pooled []string) map[string]string {
	want := map[string]string{"home-v6": pooled[0]}
	for _, p := range pooled[1:] {
		want[backends.CalicoSiblingName("home-v6", p)] = p
	}
	return want
}

// TestEveryWriteOfAStepFailingInTurnNeverLeavesTwoPoolsWithOneCIDR: in each
// step of the flap, the k-th write fails (a conflict) for every k; the pass
// stops there, no two pools ever hold one CIDR, and the next passes finish
// the step.
func TestEveryWriteOfAStepFailingInTurnNeverLeavesTwoPoolsWithOneCIDR(t *testing.T) {
	open := permit.Limits{ObjectBurst: 1000, ObjectPerMinute: 1000, TotalBurst: 1000, TotalPerMinute: 1000}
	for step := 1; step < len(flap); step++ {
		// How many writes the step takes when nothing fails.
		clean := newWorld(t, open)
		for _, s := range flap[:step] {
			clean.settle(s...)
		}
		n, err := clean.pass(flap[step]...)
		if err != nil || n == 0 {
			t.Fatalf("step %d: %d writes, %v", step, n, err)
		}
		for k := 1; k <= n; k++ {
			t.Run(fmt.Sprintf("step %d write %d of %d fails", step, k, n), func(t *testing.T) {
				w := newWorld(t, open)
				for _, s := range flap[:step] {
					w.settle(s...)
				}
				w.fail = k
				if _, err := w.pass(flap[step]...); err == nil {
					t.Errorf("the failed write was not reported")
				}
				w.settle(flap[step]...)
				if got, want := fmt.Sprint(w.pools()), fmt.Sprint(holds(flap[step])); got != want {
					t.Errorf("after retrying: %s, want %s", got, want)
				}
			})
		}
	}
}

// TestARefusedPermitStopsTheSequence: with a budget of one write per object
// (then one a minute), the breaker refuses the annotated pool mid-flap; the
// siblings wait for it.
func TestARefusedPermitStopsTheSequence(t *testing.T) {
	w := newWorld(t, permit.Limits{ObjectBurst: 1, ObjectPerMinute: 1, TotalBurst: 1000, TotalPerMinute: 1000})
	refused := 0
	for _, s := range flap {
		for range 10 {
			n, err := w.pass(s...)
			if err != nil {
				refused++
			}
			if n == 0 && err == nil {
				break
			}
			w.clock.Step(30 * time.Second)
		}
		if got, want := fmt.Sprint(w.pools()), fmt.Sprint(holds(s)); got != want {
			t.Fatalf("%v: %s, want %s", s, got, want)
		}
	}
	if refused == 0 {
		t.Error("the breaker never refused: the test proves nothing")
	}
}

// TestTheExistingOperatorsSiblingIsAdopted: its pool (record managed-cidr)
// and the sibling it created for the draining prefix (its name and labels)
// cost no write at the switch; A coming back deletes its sibling before the
// pool takes A.
func TestTheExistingOperatorsSiblingIsAdopted(t *testing.T) {
	w := newWorld(t, permit.Limits{ObjectBurst: 1000, ObjectPerMinute: 1000, TotalBurst: 1000, TotalPerMinute: 1000})
	ctx := context.Background()
	parent, err := w.client.Resource(gvr).Get(ctx, "home-v6", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parent.SetAnnotations(map[string]string{dynamicprefix.AnnotationName: "home", "dynamic-prefix.io/managed-cidr": b})
	_ = unstructured.SetNestedField(parent.Object, b, "spec", "cidr")
	theirs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "home-v6-1e7c59a9", "labels": map[string]any{
			"app.kubernetes.io/managed-by": "dynamic-prefix-operator", "dynamic-prefix.io/parent-pool": "home-v6",
			"dynamic-prefix.io/name": "home"}},
		"spec": map[string]any{"cidr": a},
	}}
	for _, u := range []*unstructured.Unstructured{parent, theirs} {
		if err := w.client.Tracker().Add(u); err != nil {
			if err := w.client.Tracker().Update(gvr, u, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.sync()
	if n, err := w.pass(b, a); n != 0 || err != nil {
		t.Errorf("the switch wrote %d times (%v): %v", n, err, w.pools())
	}
	w.settle(a, b)
	if got, want := fmt.Sprint(w.pools()), fmt.Sprint(holds([]string{a, b})); got != want {
		t.Errorf("A back: %s, want %s", got, want)
	}
}

// TestASiblingLosesTheSettingItsPoolLost: a sibling is its pool's copy (and
// renumber-writer-siblings admits no other): a setting the user takes off
// the pool goes off its siblings too, where a merge patch of the pool's
// settings alone left it there.
func TestASiblingLosesTheSettingItsPoolLost(t *testing.T) {
	w := newWorld(t, permit.Limits{ObjectBurst: 100, ObjectPerMinute: 100, TotalBurst: 100, TotalPerMinute: 100})
	setPool := func(spec map[string]any) {
		u, err := w.client.Resource(gvr).Get(context.Background(), "home-v6", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cidr, _, _ := unstructured.NestedString(u.Object, "spec", "cidr")
		spec["cidr"] = cidr
		u.Object["spec"] = spec
		if _, err := w.client.Resource(gvr).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.sync()
	}
	sibling := func() map[string]any {
		u, err := w.client.Resource(gvr).Get(context.Background(), backends.CalicoSiblingName("home-v6", a), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.Object["spec"].(map[string]any)
	}
	setPool(map[string]any{"blockSize": int64(122), "natOutgoing": true})
	w.settle(a)
	w.settle(b, a)
	if got := sibling()["natOutgoing"]; got != true {
		t.Fatalf("the sibling's natOutgoing %v, want its pool's, true", got)
	}
	setPool(map[string]any{"blockSize": int64(122)})
	w.settle(b, a)
	want := map[string]any{"cidr": a, "disabled": true, "blockSize": int64(122)}
	if diff := cmp.Diff(want, sibling()); diff != "" {
		t.Errorf("the sibling after its pool lost natOutgoing (-want +got):\n%s", diff)
	}
}
