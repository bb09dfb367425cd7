package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
)

// squatter adds tenant/squat, a Service following no DynamicPrefix whose
// own lbipam.cilium.io/ips names addr (its owner's annotation; nothing of
// renumber's), and returns a func that plays the Service informer's update
// for it (Controller.ServiceChanged, with the cache as catchUp left it).
func squatter(t *testing.T, f *fixture, addr string) (changed func()) {
	t.Helper()
	squat := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "squat", ResourceVersion: "1",
			CreationTimestamp: metav1.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC),
			Annotations:       map[string]string{holdings.AnnotationIPs: addr}},
	}
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").(interface {
		CreateFake(*metav1.PartialObjectMetadata, metav1.CreateOptions, ...string) (*metav1.PartialObjectMetadata, error)
	}).CreateFake(squat, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	return func() {
		t.Helper()
		o, ok, err := f.svcs.GetByKey("tenant/squat")
		if err != nil || !ok {
			t.Fatalf("tenant/squat is not cached: %v", err)
		}
		f.ctl.ServiceChanged(o.(*holdings.CachedService))
	}
}

// equal is how many of got equal want.
func equal(got []string, want string) int {
	n := 0
	for _, g := range got {
		if g == want {
			n++
		}
	}
	return n
}

// Issue 42 (red team r6a, F1): two Services never share one address - a
// collision is reported, not raced. A tenant's Service that follows no
// DynamicPrefix lists web's next address in its own lbipam.cilium.io/ips,
// waiting; when the pool gains B, its load balancer grants it before the
// writer's write of web's Service asks for it. The writer's claims give it
// to web (they weigh only followers), and web keeps asking for it; but it
// is published for tenant/squat, so it is never web's DNS target: web
// stays on its draining address, then has none once A's drain ends, and
// the DynamicPrefix is not Ready. A ServiceAddressConflict naming
// tenant/squat says so once, on the DynamicPrefix and on web, and the same
// conflict over more passes writes nothing. The load balancer's grant and
// its letting go each queue a pass over home (tenant/squat follows none:
// only Writer.Concerned does), and once it lets go web's target comes back
// in that pass.
func TestAnAddressPublishedForAnotherIsNotTheTargetAndIsReportedOnce(t *testing.T) {
	f := converged(t, generous)
	f.publish("192.0.2.7", onA)
	changed := squatter(t, f, onB)
	pass := func() []string { return f.settle(passHome) }
	if got := pass(); len(got) != 0 {
		t.Fatalf("at rest, with tenant/squat waiting for %s: wrote %q", onB, got)
	}
	f.report(3, prefixB, prefixA)
	t.Logf("the renumbering wrote %q", pass())
	f.emptyQueue()
	f.publishedFor = map[string][]string{"tenant/squat": {onB}} // LB-IPAM grants the waiting request
	f.catchUp()
	changed()
	if !f.emptyQueue() {
		t.Errorf("tenant/squat's load balancer publishing %s, given to web, queued no pass over home", onB)
	}
	t.Logf("the pass that sees it wrote %q", pass())
	ann := f.service()
	if ann[holdings.AnnotationTarget] != onA || !strings.Contains(ann[holdings.AnnotationIPs], onB) {
		t.Errorf("during the drain web has %q, target %q: want it to keep asking for %s and its target on %s", ann[holdings.AnnotationIPs], ann[holdings.AnnotationTarget], onB, onA)
	}
	f.report(3, prefixB) // the drain ends
	f.publish("192.0.2.7")
	t.Logf("the drain's end wrote %q", pass())
	ann = f.service()
	if ann[holdings.AnnotationTarget] != "" || ann[holdings.AnnotationTargetAlpha] != "" {
		t.Errorf("web's DNS target is %q/%q once A's drain ended, want none: %s is published for tenant/squat", ann[holdings.AnnotationTarget], ann[holdings.AnnotationTargetAlpha], onB)
	}
	if !strings.Contains(ann[holdings.AnnotationIPs], onB) {
		t.Errorf("web no longer asks for %s: %q", onB, ann[holdings.AnnotationIPs])
	}
	c, ready := f.condition(render.ServiceAddressConflict), f.condition(render.Ready)
	if c.Status != metav1.ConditionTrue || c.Reason != render.ReasonPublishedElsewhere || !strings.Contains(c.Message, "tenant/squat") || !strings.Contains(c.Message, onB) {
		t.Errorf("%s %s %s %q, want True %s naming tenant/squat and %s", render.ServiceAddressConflict, c.Status, c.Reason, c.Message, render.ReasonPublishedElsewhere, onB)
	}
	if ready.Status != metav1.ConditionFalse {
		t.Errorf("Ready %s %q while web's address is published for tenant/squat", ready.Status, ready.Message)
	}
	for i := range 3 {
		f.clock.Step(time.Minute)
		if got := pass(); len(got) != 0 {
			t.Errorf("pass %d over the same conflict wrote %q", i+1, got)
		}
	}
	for _, on := range []string{"home", "web"} {
		if n := equal(f.events.warnings, render.ServiceAddressConflict+" "+on); n != 1 {
			t.Errorf("%d %s warnings on %s, want 1 (events %q)", n, render.ServiceAddressConflict, on, f.events.messages)
		}
	}
	if !slices.ContainsFunc(f.events.messages, func(m string) bool {
		return strings.HasPrefix(m, render.ServiceAddressConflict) && strings.Contains(m, "tenant/squat")
	}) {
		t.Errorf("no %s event names tenant/squat: %q", render.ServiceAddressConflict, f.events.messages)
	}

	f.publishedFor = nil // tenant/squat lets it go
	f.catchUp()
	changed()
	if !f.emptyQueue() {
		t.Fatalf("tenant/squat's load balancer letting %s go queued no pass over home", onB)
	}
	t.Logf("the pass after it let go wrote %q", pass())
	if got := f.service()[holdings.AnnotationTarget]; got != onB {
		t.Errorf("web's DNS target is %q once tenant/squat let %s go, want it", got, onB)
	}
	if c := f.condition(render.ServiceAddressConflict); c.Status != "" {
		t.Errorf("%s still %s %q", render.ServiceAddressConflict, c.Status, c.Message)
	}
	if r := f.condition(render.Ready); r.Status != metav1.ConditionTrue {
		t.Errorf("Ready %s %q once the conflict ended", r.Status, r.Message)
	}
	f.publish("192.0.2.7", onB) // LB-IPAM grants web's request
	if got := pass(); len(got) != 0 {
		t.Errorf("web's load balancer publishing %s wrote %q", onB, got)
	}
}
