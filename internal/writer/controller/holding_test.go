package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
)

// Issue 42 (red team r4a), one tenant, a renumbering with no drain: the
// writer remembers the placement an ask won with (render.Given.Won) only
// where it asked for every address that placement puts on the pooled
// prefixes - never for a claim of nothing. The
// tenant's older Service copies web's suffix and lists web's address in its
// own lbipam.cilium.io/ips (a user's entry, not in its managed-ips record):
// the address its suffix puts on A is "the user's", so it asks for nothing,
// wins that empty claim, and the writer remembers web's placement as the
// tenant's. At the renumbering the tenant asks for web's next address: had
// its placement been remembered, both would hold it by the writer
// (HeldByWriter) and the older - the tenant - would take it, with web's
// DNS target (it did, before render.Given.Won).
func TestAClaimOfNothingRemembersNoPlacement(t *testing.T) {
	f := tenantOlderThanWeb(t)
	ctx := t.Context()
	f.publish("192.0.2.7", onA)
	// The tenant copies web's suffix, and lists web's address as its own
	// entry (the target record the writer wrote keeps the geometric rule
	// away, so nothing of its entries is the writer's).
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Patch(ctx, "old", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:1","lbipam.cilium.io/ips":"`+onA+`","dynamic-prefix.io/managed-ips":null}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	t.Logf("the pass before wrote %q", f.sync(passHome))
	f.catchUp()
	if !strings.Contains(f.service()[holdings.AnnotationIPs], onA) {
		t.Fatalf("before: web has %q, want %s", f.service()[holdings.AnnotationIPs], onA)
	}
	old := renumberedWithNoDrain(t, f)
	if !strings.Contains(f.service()[holdings.AnnotationIPs], onB) {
		t.Errorf("default/web did not get its new address %s: %q", onB, f.service()[holdings.AnnotationIPs])
	}
	if strings.Contains(old.Annotations[holdings.AnnotationIPs], onB) {
		t.Errorf("tenant/old holds web's new address %s (%q): a placement remembered for a claim of nothing took it", onB, old.Annotations[holdings.AnnotationIPs])
	}
}

// Issue 42 (red team r4a), one tenant, two DynamicPrefixes: the claims
// are weighed per DynamicPrefix (Writer.Services gets one spec), so two that
// pool one prefix - "home" for the load balancer's Services, and a second
// on the same link for anything else, its spec.serviceNamespaces left unset
// - never see each other's asks. The tenant's Service follows the second
// with web's suffix and is given web's address beside web (not weighed:
// a limit, docs/security.md). What is asked here: each DynamicPrefix
// reports the other (condition PrefixOverlap True and a Warning event,
// naming it). Before, nothing said so.
func TestTwoDynamicPrefixesOnOnePrefixReportEachOther(t *testing.T) {
	const onA = "2001:db8:a:0:ffff::1"
	f := tenantOlderThanWeb(t)
	ctx := t.Context()
	home, err := f.dyn.Resource(api.GVR).Get(ctx, "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second := &unstructured.Unstructured{Object: map[string]any{"apiVersion": home.GetAPIVersion(), "kind": home.GetKind(),
		"metadata": map[string]any{"name": "second"}, "spec": home.Object["spec"]}}
	if _, err := f.dyn.Resource(api.GVR).Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Patch(ctx, "old", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"dynamic-prefix.io/name":"second","dynamic-prefix.io/suffix":"::ffff:0:0:1"}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	for _, k := range []Key{passHome, {Action: SyncDynamicPrefix, Name: "second"}, passHome, {Action: SyncDynamicPrefix, Name: "second"}} {
		t.Logf("the pass over %s wrote %q", k.Name, f.sync(k))
		f.catchUp()
	}
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("web %q; tenant/old %q", f.service()[holdings.AnnotationIPs], old.Annotations[holdings.AnnotationIPs])
	if strings.Contains(old.Annotations[holdings.AnnotationIPs], onA) && strings.Contains(f.service()[holdings.AnnotationIPs], onA) {
		t.Logf("the limit: the writer gave %s to default/web (home) and to tenant/old (second)", onA)
	}
	for dp, other := range map[string]string{"home": "second", "second": "home"} {
		u, err := f.dyn.Resource(api.GVR).Get(ctx, dp, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := api.FromUnstructured(u)
		if err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(st.Status.Conditions, render.PrefixOverlap)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "DynamicPrefix "+other+" (on "+prefixA+")") {
			t.Errorf("%s's condition %s is %+v, want True naming %s", dp, render.PrefixOverlap, c, other)
		}
		if !slices.Contains(f.events.reasons, render.PrefixOverlap+" "+dp) {
			t.Errorf("events %q, want %s on %s", f.events.reasons, render.PrefixOverlap, dp)
		}
	}
}

// Issue 42 (red team r4a), one tenant and an admin's edit: the admin
// renames the subnet web is placed on (spec.subnets "lb6" becomes "svc",
// the same 255th /64), then moves web's dynamic-prefix.io/service-subnet to
// the new name. For the passes in between web's placement resolves to
// nothing (InvalidServiceAnnotations): it asks for nothing, but it still
// holds what the writer gave it and what its load balancer publishes for
// it (an absent ask). A younger tenant's Service naming "svc" and web's
// suffix asks for web's address meanwhile, and gets none of it. Before,
// the writer's memory forgot web for that pass, gave the tenant the
// address, and then held it for the tenant (HeldByWriter) over web's load
// balancer status (HeldByStatus) for the rest of the term.
func TestAServiceOutOfOnePassKeepsItsAddress(t *testing.T) {
	const onA = "2001:db8:a:ff:ffff::1"
	f := tenantOlderThanWeb(t)
	ctx := t.Context()
	patch := func(ns, name, annotations string) {
		t.Helper()
		if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace(ns).Patch(ctx, name, "application/merge-patch+json",
			[]byte(`{"metadata":{`+annotations+`}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pass := func() {
		t.Helper()
		f.catchUp()
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	f.delegateHome(t, "lb6")
	// web is the older: age is not what decides here.
	patch("default", "web", `"creationTimestamp":"2020-01-01T00:00:00Z","annotations":{"dynamic-prefix.io/service-subnet":"lb6"}`)
	pass()
	f.publish("192.0.2.7", onA)
	pass()
	if got := f.service()[holdings.AnnotationIPs]; !strings.Contains(got, onA) {
		t.Fatalf("before: web has %q, want %s", got, onA)
	}
	f.delegateHome(t, "svc") // the admin renames the subnet ...
	patch("tenant", "old", `"annotations":{"dynamic-prefix.io/service-subnet":"svc","dynamic-prefix.io/suffix":"::ffff:0:0:1"}`)
	patch("tenant", "old", `"creationTimestamp":"2026-11-28T00:00:00Z"`)
	pass()
	patch("default", "web", `"annotations":{"dynamic-prefix.io/service-subnet":"svc"}`) // ... and moves web to it
	pass()
	pass()
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("web %q target %q; tenant/old %q target %q", f.service()[holdings.AnnotationIPs], f.service()[holdings.AnnotationTarget],
		old.Annotations[holdings.AnnotationIPs], old.Annotations[holdings.AnnotationTarget])
	if !strings.Contains(f.service()[holdings.AnnotationIPs], onA) {
		t.Errorf("default/web, older and published at %s by its load balancer, lost it to the younger tenant/old (%q)", onA, old.Annotations[holdings.AnnotationIPs])
	}
}

// TestAClaimOfNothingRemembersNoPlacement on a Gateway: the tenant's older
// Gateway copies web's suffix and lists web's address in its own
// spec.addresses (its owner's field: the writer's record leaves it out), so
// it asks for nothing and wins; at a renumbering with no drain its placement,
// had it been remembered, would give it web's next address by age.
func TestAGatewayListingWebsAddressRemembersNoPlacement(t *testing.T) {
	f := converged(t, generous)
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(t.Context(), "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"creationTimestamp":"2026-11-01T00:00:00Z"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.publish("192.0.2.7", onA)
	g := olderGatewayNaming(t, f, onA, false)
	u, err := f.dyn.Resource(gatewayGVR).Namespace("tenant").Get(t.Context(), "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ann := u.GetAnnotations()
	// A record naming an address its spec lacks (dropped as read): present,
	// so nothing in its spec is the writer's by where it lies.
	ann[holdings.AnnotationManagedIPs] = "2001:db8:a:0:ffff::99"
	u.SetAnnotations(ann)
	if _, err := f.dyn.Resource(gatewayGVR).Namespace("tenant").Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pass := func() { t.Helper(); g.pass() }
	pass()
	if !strings.Contains(f.service()[holdings.AnnotationIPs], onA) {
		t.Fatalf("before: web has %q, want %s", f.service()[holdings.AnnotationIPs], onA)
	}
	f.report(3, prefixB)
	pass()
	pass()
	t.Logf("web %q; gw holds %v", f.service()[holdings.AnnotationIPs], g.holds())
	if !strings.Contains(f.service()[holdings.AnnotationIPs], onB) {
		t.Errorf("default/web did not get its new address %s: %q", onB, f.service()[holdings.AnnotationIPs])
	}
	if got, _ := g.holds()["addresses"].([]string); slices.Contains(got, onB) {
		t.Errorf("Gateway tenant/gw holds web's new address %s (%q): a placement remembered for a claim of nothing took it", onB, got)
	}
}

// web's address on A and on B (suffix ::ffff:0:0:1 on the /64), and the
// absent tenant's own on A.
const onA, onB, oldOnA = "2001:db8:a:0:ffff::1", "2001:db8:b:0:ffff::1", "2001:db8:a:0:ffff:0:0:99"

// absentOnPurpose is tenantOlderThanWeb with web published on A and
// tenant/old made absent (a subnet name the spec lacks) with its own
// lbipam.cilium.io/ips naming its address and web's next one, both
// published for it; extra is more of its metadata (JSON members, each with a
// trailing comma). One pass on A has run.
func absentOnPurpose(t *testing.T, extra string) *fixture {
	t.Helper()
	f := tenantOlderThanWeb(t)
	f.publish("192.0.2.7", onA)
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Patch(t.Context(), "old", "application/merge-patch+json",
		[]byte(`{"metadata":{`+extra+`"annotations":{"dynamic-prefix.io/service-subnet":"nosuch","lbipam.cilium.io/ips":"`+oldOnA+`,`+onB+`"}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.publishedFor = map[string][]string{"tenant/old": {oldOnA, onB}}
	f.catchUp()
	t.Logf("the pass before wrote %q", f.sync(passHome))
	f.catchUp()
	return f
}

// Issue 42 (red team r5), one tenant absent on purpose: its older Service
// (given ::ffff:0:0:99 on A in the writer's last pass) names a subnet the
// spec lacks, so its annotations do not render and it is an absent ask -
// and the writer no longer rewrites its lbipam.cilium.io/ips, which the
// tenant sets to its own address and web's next one. Its load balancer
// grants both before the writer asks for web's (the pool gets B, the
// tenant's request was waiting) and publishes them. An absent ask's hold
// is of the whole ask: by the writer (its own address), the strongest, and
// it is older, so it claimed web's next address first, address by address;
// web, which holds by the writer too, lost its whole claim - its address
// on A, still draining, with it. Wanted: an absent ask weighed address by
// address, each at its own hold (offer), and an ask naming an address the
// writer gave another holding nothing by the writer (render.HoldOf): the
// tenant keeps its own address, web both of its.
func TestAnAbsentServiceIsWeighedAddressByAddress(t *testing.T) {
	f := absentOnPurpose(t, "")
	f.report(3, prefixB, prefixA)
	for range 2 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	got := f.service()[holdings.AnnotationIPs]
	t.Logf("web %q target %q", got, f.service()[holdings.AnnotationTarget])
	if !strings.Contains(got, onB) || !strings.Contains(got, onA) {
		t.Errorf("default/web has %q, want its new address %s and its draining %s: the absent tenant/old's hold by its own address took web's", got, onB, onA)
	}
}

// Issue 42 (red team r5), an honest Service absent across a renumbering:
// web's annotations stop rendering (a subnet name the spec lacks: the
// admin's edit, or web's owner's slip) and then the prefix is renumbered
// with no drain. An absent ask keeps what it was given and what its load
// balancer publishes - its address on A - but not the placement it was
// given, renumbered: nobody asks for web's address on B for web, and a
// tenant Service copying web's suffix is given it. When web renders again
// it asks for that address, which the writer now gave the tenant
// (HeldByWriter), while web's load balancer still publishes only the old
// one: web lost it for the term. Wanted: an absent ask offered on its
// remembered placement renumbered too (Given.Following), which it holds by
// the writer: web keeps its address on B.
func TestAnAbsentServiceKeepsItsPlacementRenumbered(t *testing.T) {
	f := tenantOlderThanWeb(t)
	ctx := t.Context()
	f.publish("192.0.2.7", onA)
	patch := func(ns, name, annotations string) {
		t.Helper()
		if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace(ns).Patch(ctx, name, "application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":`+annotations+`}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pass := func() {
		t.Helper()
		f.catchUp()
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	patch("default", "web", `{"dynamic-prefix.io/service-subnet":"nosuch"}`)
	patch("tenant", "old", `{"dynamic-prefix.io/suffix":"::ffff:0:0:1"}`)
	pass()
	f.report(3, prefixB)
	pass()
	pass()
	patch("default", "web", `{"dynamic-prefix.io/service-subnet":null}`)
	pass()
	pass()
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := f.service()[holdings.AnnotationIPs]
	t.Logf("web %q target %q; tenant/old %q", got, f.service()[holdings.AnnotationTarget], old.Annotations[holdings.AnnotationIPs])
	if !strings.Contains(got, onB) {
		t.Errorf("default/web has %q, want its next address %s: tenant/old (%q) was given it while web was absent", got, onB, old.Annotations[holdings.AnnotationIPs])
	}
}

// Issue 42 (red team r5): PrefixOverlap's queueing (syncDynamicPrefix
// queues every DynamicPrefix at once when the overlap it finds differs from
// the condition in its status) compares with the status read at the start
// of the pass - which a pass that ends before its status write never
// changes. home names B (a renumbering) and waits for admission to see
// that status (Config.StatusSeen; the dry runs of its pool write refused
// meanwhile); "second", on the same prefix, is created then. Each pass of
// the wait finds the overlap its status does not report yet, queues home
// again at once, and asks another dry run: the wait's backoff
// (firstDryRun, doubling) is bypassed, and the passes and the API server's
// dry runs loop with the clock standing still until admission sees the
// status. Wanted: a pass on the clock, a dry run each.
func TestAPassWaitingForAdmissionKeepsItsBackoffWhenItFindsAnOverlap(t *testing.T) {
	f := converged(t, generous)
	dryRuns := f.admitting(generous, 10*time.Second, -1)
	f.report(3, prefixB, prefixA)
	if got, o := f.pass(); !slices.Equal(got, []string{"patch dynamicprefixes/status home"}) {
		t.Fatalf("the pass naming B wrote %q (%+v)", got, o)
	}
	f.catchUp()
	f.overlapHome(t)
	f.emptyQueue() // what the test's edits and passes queued
	passes := 0
	for range 30 { // the clock stands still
		f.pass()
		passes++
		if !f.emptyQueue() {
			break
		}
	}
	t.Logf("%d passes over home and %d dry runs with the clock standing still", passes, dryRuns.Load())
	if passes > 2 {
		t.Errorf("home passed %d times and asked %d dry runs at one instant, each queueing itself again at once: want one, then a pass on the clock", passes, dryRuns.Load())
	}
}

// Issue 42 (red team r5): the same queueing when the status write fails
// (here refused every time, as by an admission policy or an API server
// that times out): the failed pass is retried by the queue's rate limiter
// (backing off), but the overlap it found, never written, queues it again
// at once first - a status write a pass, with the clock standing still,
// for as long as the write fails.
func TestAFailingStatusWriteKeepsItsBackoffWhenItFindsAnOverlap(t *testing.T) {
	f := converged(t, generous)
	ctx := t.Context()
	f.overlapHome(t)
	var refused int
	f.dyn.PrependReactor("patch", "dynamicprefixes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		refused++
		return true, nil, apierrors.NewForbidden(api.GVR.GroupResource(), "home", errors.New("refused"))
	})
	f.emptyQueue() // what the test's edits and passes queued
	passes := 0
	for range 30 { // the clock stands still
		f.writes = nil
		f.ctl.Sync(ctx, passHome)
		passes++
		if !f.emptyQueue() {
			break
		}
	}
	t.Logf("%d passes over home and %d refused status writes with the clock standing still", passes, refused)
	if passes > 2 {
		t.Errorf("home passed %d times, %d status writes refused, at one instant: want the queue's backoff", passes, refused)
	}
}

// TestAnAbsentServiceIsWeighedAddressByAddress with a younger tenant and a
// renumbering with no drain: the pass before the renumbering already
// claimed web's next address for the absent tenant (published for it, on
// no pooled prefix yet) and remembered it as given (Given.To): at the
// renumbering the tenant holds it by the writer, and web - whose placement
// lands there but on an address the writer gave another, and whose load
// balancer publishes only its old one - held nothing: age did not enter.
// Wanted: what an absent ask keeps only by its load balancer's status is
// its for that pass, not remembered as given (apply's remembered): web keeps its
// next address.
func TestWhatAnAbsentServiceKeepsByItsStatusIsNotRememberedAsGiven(t *testing.T) {
	f := absentOnPurpose(t, `"creationTimestamp":"2026-11-28T00:00:00Z",`)
	old := renumberedWithNoDrain(t, f)
	if got := f.service()[holdings.AnnotationIPs]; !strings.Contains(got, onB) {
		t.Errorf("default/web (older) has %q, want its new address %s: the younger absent tenant/old (%q) holds it by the writer", got, onB, old.Annotations[holdings.AnnotationIPs])
	}
}

// Issue 42: a DynamicPrefix deleted while it overlapped another ends the
// overlap the other reports. The other's status said PrefixOverlap True,
// naming it, and nothing queued the other again: the condition and its
// warning stayed until some other change passed over it. Wanted: the
// deleted one's pass queues every DynamicPrefix (what it found changes to
// nothing), and the other's next pass reports no overlap.
func TestDeletingAnOverlappingDynamicPrefixEndsTheOthersReport(t *testing.T) {
	f := converged(t, generous)
	ctx := t.Context()
	f.overlapHome(t)
	for _, k := range []Key{{Action: SyncDynamicPrefix, Name: "second"}, passHome} {
		t.Logf("the pass over %s wrote %q", k.Name, f.sync(k))
		f.catchUp()
	}
	if c := f.condition(render.PrefixOverlap); c.Status != metav1.ConditionTrue {
		t.Fatalf("home's %s is %+v before the deletion, want True", render.PrefixOverlap, c)
	}
	f.emptyQueue() // what the test's edits and passes queued
	if err := f.dyn.Resource(api.GVR).Delete(ctx, "second", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	t.Logf("the pass over the deleted second wrote %q", f.sync(Key{Action: SyncDynamicPrefix, Name: "second"}))
	if !f.emptyQueue() {
		t.Fatalf("deleting second, which home reports overlapping it, queued no pass over home")
	}
	t.Logf("the pass over home wrote %q", f.sync(passHome))
	f.catchUp()
	if c := f.condition(render.PrefixOverlap); c.Status == metav1.ConditionTrue {
		t.Errorf("home's %s is %+v after second's deletion, want none or False", render.PrefixOverlap, c)
	}
}

// overlapHome creates "second": home's spec, its current prefix A - a
// DynamicPrefix overlapping home.
func (f *fixture) overlapHome(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	home, err := f.dyn.Resource(api.GVR).Get(ctx, "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second := &unstructured.Unstructured{Object: map[string]any{"apiVersion": home.GetAPIVersion(), "kind": home.GetKind(),
		"metadata": map[string]any{"name": "second"}, "spec": home.Object["spec"],
		"status": map[string]any{"currentPrefix": prefixA}}}
	if _, err := f.dyn.Resource(api.GVR).Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
}

// emptyQueue empties the controller's queue (its delayed keys stay), saying
// whether a pass over home was queued.
func (f *fixture) emptyQueue() (home bool) {
	for f.ctl.queue.Len() > 0 {
		k, _ := f.ctl.queue.Get()
		f.ctl.queue.Done(k)
		home = home || k == passHome
	}
	return home
}
