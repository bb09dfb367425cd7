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

// Issue 42 (red team r7a F2), the controller's view: web was recreated
// while A drained, so the tenant's own lbipam.cilium.io/ips took web's
// address on A, still pooled and free, and its load balancer publishes it
// for the tenant; web's publishes web's address on B alone. Within the term
// the writer's memory gives web both (A's is published for another:
// AddressPublishedForAnother). At a new term the older tenant follows with
// web's suffix: its address on A, renumbered, ranked HeldByEarlierStatus
// above web's status on B, and the writer wrote both onto the tenant and
// released web - web lost B at its load balancer. Wanted (possession): the
// claims move no address a load balancer publishes; the tenant is not
// written web's address on B, web keeps it, the conflict is reported and
// Ready is False; and the passes after write nothing.
func TestAtANewTermTheTenantsAddressOnTheDrainingPrefixTakesNothingOfWebs(t *testing.T) {
	f := tenantOlderThanWeb(t)
	f.report(3, prefixB, prefixA)
	annotate(t, f, "tenant", "old", `"annotations":{"lbipam.cilium.io/ips":"`+onA+`"}`)
	f.publishedFor = map[string][]string{"tenant/old": {onA}} // free on A once web was recreated
	f.publish("192.0.2.7", onB)
	for range 2 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	if got := f.service()[holdings.AnnotationIPs]; !strings.Contains(got, onB) {
		t.Fatalf("before the new term: default/web has %q, want %s", got, onB)
	}
	annotate(t, f, "tenant", "old", `"annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:1"}`)
	f.catchUp()
	f.ctl.write.Forget() // a new leader term
	for range 2 {
		t.Logf("the new term's pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(t.Context(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web := f.service()
	t.Logf("web %q target %q; tenant/old %q; %s: %s", web[holdings.AnnotationIPs], web[holdings.AnnotationTarget],
		old.Annotations[holdings.AnnotationIPs], f.condition("Ready").Reason, f.condition("Ready").Message)
	if !strings.Contains(web[holdings.AnnotationIPs], onB) {
		t.Errorf("default/web has %q after a new term, want %s, which its load balancer publishes for it", web[holdings.AnnotationIPs], onB)
	}
	if strings.Contains(old.Annotations[holdings.AnnotationIPs], onB) {
		t.Errorf("tenant/old was written %s, published for default/web: %q", onB, old.Annotations[holdings.AnnotationIPs])
	}
	if c := f.condition("ServiceAddressConflict"); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "tenant/old") {
		t.Errorf("ServiceAddressConflict %s %q, want True naming tenant/old", c.Status, c.Message)
	}
	if f.condition("Ready").Status == metav1.ConditionTrue {
		t.Errorf("Ready %q while web and tenant/old each ask for what the other's load balancer publishes", f.condition("Ready").Message)
	}
	for range 3 {
		if got := f.sync(passHome); len(got) != 0 {
			t.Errorf("a pass with nothing changed wrote %q (%s)", got, f.condition("ServiceAddressConflict").Message)
		}
		f.catchUp()
	}
}

// Red team r8 F3, the controller's view: during A's drain a Service is
// created - default/fresh, suffix ::ffff:0:0:5 - after the tenant's older
// Service, following home with a suffix of its own, had its own
// lbipam.cilium.io/ips entry granted fresh's address on A, still pooled and
// free. (One that follows nothing is no claimant: the writer asks for the
// address for fresh and reports it published for the other.) Possession barred fresh whole (its
// load balancer publishes nothing for it on the pooled space): it was
// written nothing, not even its address on B, for the rest of the drain,
// and home reported an ordinary conflict. Wanted: its address on A alone
// withheld - fresh written its address on B and its DNS target there,
// home's ServiceAddressConflict AddressPublishedForAnother naming
// tenant/old (Ready False), a Warning on fresh - and the passes after, its
// address published, write nothing.
func TestAServiceCreatedDuringADrainIsWrittenItsCurrentAddress(t *testing.T) {
	const freshOnA, freshOnB = "2001:db8:a:0:ffff::5", "2001:db8:b:0:ffff::5"
	f := tenantOlderThanWeb(t)
	f.publish("192.0.2.7", onA)
	f.report(3, prefixB, prefixA)
	t.Logf("the renumbering wrote %q", f.settle(passHome))
	f.publish("192.0.2.7", onB, onA)
	t.Logf("web's new address published: wrote %q", f.settle(passHome))
	annotate(t, f, "tenant", "old", `"annotations":{"lbipam.cilium.io/ips":"`+freshOnA+`"}`)
	f.publishedFor = map[string][]string{"tenant/old": {freshOnA}} // granted while free
	f.catchUp()
	t.Logf("the tenant's own entry wrote %q", f.settle(passHome))
	fresh := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fresh", ResourceVersion: "1",
			CreationTimestamp: metav1.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC),
			Annotations:       map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:0:5"}},
	}
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").(interface {
		CreateFake(*metav1.PartialObjectMetadata, metav1.CreateOptions, ...string) (*metav1.PartialObjectMetadata, error)
	}).CreateFake(fresh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.events.reset()
	got := f.settle(passHome)
	read := func() map[string]string {
		s, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Get(t.Context(), "fresh", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Annotations
	}
	ann := read()
	t.Logf("fresh's first pass wrote %q: ips %q target %q; %s", got, ann[holdings.AnnotationIPs], ann[holdings.AnnotationTarget], f.condition(render.ServiceAddressConflict).Message)
	if want := []string{"patch dynamicprefixes/status home", "patch services fresh"}; !slices.Equal(got, want) {
		t.Errorf("fresh's first pass wrote %q, want %q", got, want)
	}
	if ann[holdings.AnnotationIPs] != freshOnB || ann[holdings.AnnotationTarget] != freshOnB {
		t.Errorf("fresh: ips %q target %q, want its address on B, %s, alone (its address on A is published for tenant/old)", ann[holdings.AnnotationIPs], ann[holdings.AnnotationTarget], freshOnB)
	}
	c := f.condition(render.ServiceAddressConflict)
	if c.Status != metav1.ConditionTrue || c.Reason != render.ReasonPublishedElsewhere || !strings.Contains(c.Message, "tenant/old") || !strings.Contains(c.Message, freshOnA) {
		t.Errorf("ServiceAddressConflict %s %s %q, want True %s naming %s and tenant/old", c.Status, c.Reason, c.Message, render.ReasonPublishedElsewhere, freshOnA)
	}
	if f.condition("Ready").Status == metav1.ConditionTrue {
		t.Errorf("Ready %q while fresh's address on A is published for tenant/old", f.condition("Ready").Message)
	}
	if !slices.Contains(f.events.warnings, render.ServiceAddressConflict+" fresh") ||
		!slices.ContainsFunc(f.events.messages, func(m string) bool { return strings.Contains(m, freshOnA+" for tenant/old") }) {
		t.Errorf("Warnings %q (%q), want one on fresh naming %s and tenant/old", f.events.warnings, f.events.messages, freshOnA)
	}
	f.publishedFor["default/fresh"] = []string{freshOnB}
	f.catchUp()
	for range 3 {
		if got := f.settle(passHome); len(got) != 0 {
			t.Errorf("a pass with nothing changed wrote %q (%s)", got, f.condition(render.ServiceAddressConflict).Message)
		}
	}
}
