package controller

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/render"
)

// Issue 42: two DynamicPrefixes with subnets of their own in one /56 - the
// set-up the docs ask for ("subnets and ranges of its own") - hand out no
// address in common, and nothing reports them. home follows A (the /56's
// /64 number 0, on eth0) with delegatedPrefixLength 56 and its subnet lb6
// (number 255); "second" follows the /64 number 1 on eth1 with its own
// subnet (number 16). Before, each compared whole delegations: home's pass
// set PrefixOverlap, wrote its status and warned, at rest, for nothing a
// person could fix. Wanted: home's pass writes nothing and announces
// nothing, and second's pass does not report home either.
func TestDisjointSubnetsOfOneDelegationAreNoOverlap(t *testing.T) {
	f := converged(t, generous)
	ctx := t.Context()
	f.delegateHome(t, "lb6")
	f.catchUp()
	t.Logf("home's pass after the spec's delegation wrote %q", f.sync(passHome))
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Fatalf("home is not at rest with its delegation: its pass wrote %q", got)
	}
	second := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": "second"},
		"spec": map[string]any{
			"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth1", "delegatedPrefixLength": int64(56)}},
			"subnets":     []any{map[string]any{"name": "pods", "offset": int64(16), "prefixLength": int64(64)}},
		},
		"status": map[string]any{"currentPrefix": "2001:db8:a:1::/64", "delegatedPrefix": "2001:db8:a::/56",
			"history": []any{map[string]any{"prefix": "2001:db8:a:1::/64", "state": "active", "delegatedPrefix": "2001:db8:a::/56"}}},
	}}
	if _, err := f.dyn.Resource(api.GVR).Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.events.reasons = nil
	f.emptyQueue()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("home's pass with second beside it on its delegation wrote %q, want nothing", got)
	}
	if f.emptyQueue() {
		t.Errorf("home's pass queued every DynamicPrefix again: it found an overlap")
	}
	if c := f.condition(render.PrefixOverlap); c.Status == metav1.ConditionTrue {
		t.Errorf("home's %s is %+v, want none", render.PrefixOverlap, c)
	}
	t.Logf("second's pass wrote %q", f.sync(Key{Action: SyncDynamicPrefix, Name: "second"}))
	f.catchUp()
	for _, e := range f.events.reasons {
		if strings.HasPrefix(e, render.PrefixOverlap+" ") {
			t.Errorf("events %q: a %s", f.events.reasons, render.PrefixOverlap)
			break
		}
	}
	if i := slices.IndexFunc(f.statusOf("second").Conditions, func(c metav1.Condition) bool { return c.Type == render.PrefixOverlap }); i >= 0 {
		t.Errorf("second's %s is %+v, want none", render.PrefixOverlap, f.statusOf("second").Conditions[i])
	}
}

// Issue 42: a DynamicPrefix reads another's space from its status (the
// other's spec and what its status names pooled), so a pass over it that
// runs before the cache shows the other's status write - the other's own
// pass queues it, at once, when what that pass finds changes - finds what
// the status named before. "second" (on eth1, its own prefix C) renumbers
// onto home's prefix A, and later away again; each time home's pass ran
// first. Before, nothing passed over home again: the overlap went
// unreported, and once reported stayed so after it ended. Wanted: the
// status event that shows what second pools moved queues home, whose pass
// then reports what is true.
func TestAnotherDynamicPrefixsStatusMovingQueuesAPassThatSeesIt(t *testing.T) {
	f := converged(t, generous)
	ctx := t.Context()
	second := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": "second"},
		"spec":     map[string]any{"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth1"}}},
		"status":   map[string]any{"currentPrefix": "2001:db8:c::/64", "history": []any{map[string]any{"prefix": "2001:db8:c::/64", "state": "active"}}},
	}}
	if _, err := f.dyn.Resource(api.GVR).Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.ctl.DynamicPrefixChanged("second") // the informer's add
	moveSecond := func(history ...any) {
		t.Helper()
		u, err := f.dyn.Resource(api.GVR).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, history[0].(map[string]any)["prefix"], "status", "currentPrefix"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(u.Object, history, "status", "history"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.dyn.Resource(api.GVR).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name    string
		history []any
		want    metav1.ConditionStatus
	}{
		{"second renumbers onto A", []any{map[string]any{"prefix": prefixA, "state": "active"}, map[string]any{"prefix": "2001:db8:c::/64", "state": "draining"}}, metav1.ConditionTrue},
		{"second renumbers away from A, its drain ended", []any{map[string]any{"prefix": "2001:db8:d::/64", "state": "active"}, map[string]any{"prefix": prefixA, "state": "expired"}}, ""},
	} {
		t.Logf("%s: home's pass before the cache shows it wrote %q", step.name, f.sync(passHome))
		f.emptyQueue() // what that pass queued
		moveSecond(step.history...)
		f.catchUp()
		f.ctl.DynamicPrefixStatusChanged("second") // the informer's update
		if !f.emptyQueue() {
			t.Errorf("%s: the status event that shows it queued no pass over home", step.name)
			continue
		}
		t.Logf("%s: home's pass then wrote %q", step.name, f.sync(passHome))
		f.catchUp()
		if c := f.condition(render.PrefixOverlap); c.Status != step.want {
			t.Errorf("%s: home's %s is %+v, want status %q", step.name, render.PrefixOverlap, c, step.want)
		}
	}
	f.emptyQueue()
	f.ctl.DynamicPrefixStatusChanged("second") // again, nothing moved
	if f.emptyQueue() {
		t.Errorf("a status event of second that moved nothing it pools queued home")
	}
}

// delegateHome gives home delegatedPrefixLength 56 and one subnet, name:
// the /56's /64 number 255 (2001:db8:a:ff::/64 under A), as the admin does.
func (f *fixture) delegateHome(t *testing.T, subnet string) {
	t.Helper()
	ctx := t.Context()
	u, err := f.dyn.Resource(api.GVR).Get(ctx, "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, int64(56), "spec", "acquisition", "routerAdvertisement", "delegatedPrefixLength"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": subnet, "offset": int64(255), "prefixLength": int64(64)}}, "spec", "subnets"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(api.GVR).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
