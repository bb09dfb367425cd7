package controller

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// Switching from the existing operator: the fixtures hold what that operator
// writes (compat.md, "Ownership records"; its status as its controller writes
// it), never what renumber would.

const prefixC = "2001:db8:c::/64"

// addrOn is web's address (suffix ::ffff:0:0:1) on p.
func addrOn(p string) string { return p[:len(p)-len("::/64")] + ":0:ffff::1" }

// operatorWorld is newFixture after the existing operator followed home from
// A to B: its finalizer and status on home, its block keys on lb, its records
// on web; every node reports B, A deprecated.
func operatorWorld(t *testing.T) *fixture {
	f := newFixture(t, generous)
	ctx := t.Context()
	at := func(m int) string {
		return time.Date(2026, 11, 1, 8, m, 0, 0, time.UTC).Format(time.RFC3339)
	}
	dp, err := f.dyn.Resource(api.GVR).Get(ctx, "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dp.SetFinalizers([]string{dynamicprefix.Finalizer})
	dp.Object["status"] = map[string]any{
		"currentPrefix": prefixB, "prefixSource": "router-advertisement", "leaseExpiresAt": at(50),
		"addressRanges": []any{map[string]any{"name": "lb", "start": "2001:db8:b:0:f000::", "end": "2001:db8:b:0:ffff:ffff:ffff:ffff", "cidr": "2001:db8:b:0:f000::/68"}},
		"history":       []any{map[string]any{"prefix": prefixA, "acquiredAt": at(0), "deprecatedAt": at(20), "state": "draining"}},
		"conditions": []any{map[string]any{"type": "PrefixAcquired", "status": "True", "reason": "PrefixAcquired",
			"message": "Prefix acquired", "lastTransitionTime": at(20)}},
	}
	if _, err := f.dyn.Resource(api.GVR).Update(ctx, dp, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb, err := f.dyn.Resource(poolGVR).Get(ctx, "lb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := func(p string) string { return p[:len(p)-len("::/64")] + ":0:f000::" }
	stop := func(p string) string { return p[:len(p)-len("::/64")] + ":0:ffff:ffff:ffff:ffff" }
	_ = unstructured.SetNestedSlice(lb.Object, []any{
		map[string]any{"cidr": "192.0.2.0/24"},
		map[string]any{"start": start(prefixB), "stop": stop(prefixB)},
		map[string]any{"start": start(prefixA), "stop": stop(prefixA)},
	}, "spec", "blocks")
	ann := lb.GetAnnotations()
	ann[dynamicprefix.AnnotationManagedBlock] = "range=" + start(prefixB) + "-" + stop(prefixB) + ",range=" + start(prefixA) + "-" + stop(prefixA)
	lb.SetAnnotations(ann)
	if _, err := f.dyn.Resource(poolGVR).Update(ctx, lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.annotateWeb(map[string]any{
		holdings.AnnotationIPs:           "192.0.2.7," + addrOn(prefixB) + "," + addrOn(prefixA),
		holdings.AnnotationManagedIPs:    addrOn(prefixB) + "," + addrOn(prefixA),
		holdings.AnnotationTargetAlpha:   addrOn(prefixB),
		holdings.AnnotationManagedTarget: addrOn(prefixB),
	})
	f.report(3, prefixB, prefixA)
	f.catchUp()
	return f
}

func (f *fixture) annotateWeb(ann map[string]any) {
	f.t.Helper()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(f.t.Context(), "web", types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) web() map[string]string {
	f.t.Helper()
	u, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Get(f.t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return u.GetAnnotations()
}

func TestSwitchingFromTheExistingOperatorWritesOnlyTheStatus(t *testing.T) {
	f := operatorWorld(t)
	// Its conditions are not ours: one status write, and nothing else.
	// web gets the GA target key and the keys record at once (TestExternalDNSTargetKeys
	// holds renumber to upgrading a Service without a keys record immediately).
	if got, want := f.sync(passHome), []string{"patch dynamicprefixes/status home", "patch services web"}; !slices.Equal(got, want) {
		t.Fatalf("the switch wrote %q, want %q", got, want)
	}
	st := f.status()
	if st.LeaseExpiresAt != nil {
		t.Errorf("leaseExpiresAt %v copied forward: it would read as expired while B is current", st.LeaseExpiresAt)
	}
	want := []string{prefixB + " active 2026-11-01T08:20:00Z -", prefixA + " draining 2026-11-01T08:00:00Z 2026-11-01T08:20:00Z"}
	if got := historyOf(st); !slices.Equal(got, want) {
		t.Errorf("history %q, want the existing operator's timestamps kept %q", got, want)
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("the second pass wrote %q", got)
	}
}

func historyOf(st api.Status) []string {
	var out []string
	stamp := func(t *metav1.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, h := range st.History {
		out = append(out, h.Prefix+" "+h.State+" "+stamp(h.AcquiredAt)+" "+stamp(h.DeprecatedAt))
	}
	return out
}

// After the switch, a renumbering releases the entries the existing operator
// wrote for a prefix once it expires: none is stranded as the user's.
func TestARenumberingAfterTheSwitchReleasesTheOperatorsEntries(t *testing.T) {
	f := operatorWorld(t)
	f.sync(passHome)
	f.catchUp()
	f.report(3, prefixC, prefixB) // A's valid lifetime ran out: nobody reports it
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("the renumbering wrote %q, want %q", got, want)
	}
	blocks, record := f.pool()
	if want := []string{"192.0.2.0/24", rangeOn(prefixC), rangeOn(prefixB)}; !slices.Equal(blocks, want) {
		t.Errorf("blocks %q, want the user's, C, B (A released) %q", blocks, want)
	}
	if want := "range=" + rangeOn(prefixC) + ",range=" + rangeOn(prefixB); record != want {
		t.Errorf("record %q, want %q", record, want)
	}
	web := f.web()
	if got, want := web[holdings.AnnotationIPs], "192.0.2.7,"+addrOn(prefixC)+","+addrOn(prefixB); got != want {
		t.Errorf("ips %q, want %q", got, want)
	}
	// The next real change is when the newer keys arrive.
	if web[holdings.AnnotationManagedTargetKeys] == "" {
		t.Errorf("the renumbering wrote web without the keys record: %v", web)
	}
}

// Deleting a DynamicPrefix that carries the existing operator's finalizer:
// everything written for it is released (the user's entries stay), then the
// finalizer goes - and only then.
func TestDeletingReleasesThenRemovesTheOperatorsFinalizer(t *testing.T) {
	f := operatorWorld(t)
	f.sync(passHome)
	f.catchUp()
	f.deleteHome()
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes home", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("the delete wrote %q, want %q", got, want)
	}
	if blocks, record := f.pool(); !slices.Equal(blocks, []string{"192.0.2.0/24"}) || record != "" {
		t.Errorf("pool %q record %q after release", blocks, record)
	}
	if got := f.web()[holdings.AnnotationIPs]; got != "192.0.2.7" {
		t.Errorf("web ips %q, want the user's alone", got)
	}
	u, err := f.dyn.Resource(api.GVR).Get(t.Context(), "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.GetFinalizers()) != 0 || u.Object["status"] == nil {
		t.Errorf("finalizers %q; the status must not be written while deleting", u.GetFinalizers())
	}
}

// TestTheFinalizerStaysWhileAReleaseFails: each release write failing in
// turn (the pool, the Service) keeps the finalizer; the next pass, with the
// write going through, releases and then removes it.
func TestTheFinalizerStaysWhileAReleaseFails(t *testing.T) {
	for _, failing := range []string{"ciliumloadbalancerippools", "services"} {
		t.Run(failing, func(t *testing.T) {
			f := operatorWorld(t)
			f.sync(passHome)
			f.catchUp()
			f.deleteHome()
			fail := true
			reactor := func(clienttesting.Action) (bool, runtime.Object, error) {
				return fail, nil, errors.New("the API server timed out")
			}
			f.dyn.PrependReactor("patch", failing, reactor)
			f.meta.PrependReactor("patch", failing, reactor)
			if o := f.ctl.Sync(t.Context(), passHome); o.Err == nil || !o.Retry {
				t.Errorf("the failed release: %+v, want an error to retry", o)
			}
			for _, a := range f.dyn.Actions() {
				if a.GetVerb() == "patch" && a.GetResource().Resource == "dynamicprefixes" {
					t.Fatalf("the finalizer was removed although %s still holds our entries", failing)
				}
			}
			fail = false
			f.catchUp()
			if got := f.sync(passHome); !slices.Contains(got, "patch dynamicprefixes home") || !slices.Contains(got, "patch "+failing+" "+map[string]string{
				"ciliumloadbalancerippools": "lb", "services": "web"}[failing]) {
				t.Errorf("the retry wrote %q, want the release, then the finalizer", got)
			}
		})
	}
}

func (f *fixture) deleteHome() {
	f.t.Helper()
	u, err := f.dyn.Resource(api.GVR).Get(f.t.Context(), "home", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	now := metav1.NewTime(f.clock.Now())
	u.SetDeletionTimestamp(&now)
	if _, err := f.dyn.Resource(api.GVR).Update(f.t.Context(), u, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.catchUp()
}

func TestARecordThatNamesNoEntryIsReportedBeforeItIsDropped(t *testing.T) {
	f := operatorWorld(t)
	f.sync(passHome)
	f.catchUp()
	lb, err := f.dyn.Resource(poolGVR).Get(t.Context(), "lb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ann := lb.GetAnnotations()
	ann[dynamicprefix.AnnotationManagedBlock] += ",block=7"
	lb.SetAnnotations(ann)
	if _, err := f.dyn.Resource(poolGVR).Update(t.Context(), lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Fatalf("an unreadable item alone wrote %q (it owns nothing; nothing else changed)", got)
	}
	f.report(3, prefixC, prefixB)
	f.sync(passHome)
	if !slices.Contains(f.events.reasons, "RecordNotUnderstood lb") {
		t.Errorf("events %q: the write dropping block=7 must say so", f.events.reasons)
	}
	if _, record := f.pool(); record != "range="+rangeOn(prefixC)+",range="+rangeOn(prefixB) {
		t.Errorf("record %q", record)
	}
}

// A pool the existing operator last wrote before it wrote records: its own
// rule (entries inside the current or a history prefix are its own) decides,
// the user's supernet stays, and the record is written once.
func TestAPoolWithoutARecordFollowsTheGeometricRule(t *testing.T) {
	f := operatorWorld(t)
	lb, err := f.dyn.Resource(poolGVR).Get(t.Context(), "lb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blocks, _, _ := unstructured.NestedSlice(lb.Object, "spec", "blocks")
	blocks = append(blocks, map[string]any{"cidr": "2001:db8::/32"})
	_ = unstructured.SetNestedSlice(lb.Object, blocks, "spec", "blocks")
	ann := lb.GetAnnotations()
	delete(ann, dynamicprefix.AnnotationManagedBlock)
	lb.SetAnnotations(ann)
	if _, err := f.dyn.Resource(poolGVR).Update(t.Context(), lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("wrote %q, want %q (the record, once)", got, want)
	}
	got, record := f.pool()
	if want := []string{"192.0.2.0/24", "2001:db8::/32", rangeOn(prefixB), rangeOn(prefixA)}; !slices.Equal(got, want) {
		t.Errorf("blocks %q, want %q", got, want)
	}
	if want := "range=" + rangeOn(prefixB) + ",range=" + rangeOn(prefixA); record != want {
		t.Errorf("record %q, want %q", record, want)
	}
}
