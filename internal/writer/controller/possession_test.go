package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
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
