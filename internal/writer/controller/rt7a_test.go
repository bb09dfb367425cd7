package controller

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
)

// Red team r7a: TestAnAddressPublishedForAnotherIsNotTheTargetAndIsReportedOnce
// with a tenant whose own lbipam.cilium.io/ips lists 64 addresses of its
// own before web's next one: its load balancer publishes web's next address
// as the 65th entry of status.loadBalancer.ingress (granted last, when the
// pool gains B). The Service cache keeps 64 entries (holdings.Slim), so the
// writer sees nobody else publishing it: once A's drain ends web's DNS
// target moves onto the tenant's address, with Ready True and no
// ServiceAddressConflict - red team r6a's F1, back past a bound.
func TestRT7AWebsTargetIsNotAnAddressPublishedForATenantPastTheCachesBound(t *testing.T) {
	f := converged(t, generous)
	f.publish("192.0.2.7", onA)
	changed := squatter(t, f, onB)
	pass := func() []string { return f.settle(passHome) }
	pass()
	f.report(3, prefixB, prefixA)
	t.Logf("the renumbering wrote %q", pass())
	var ingress []string
	for i := range 64 {
		ingress = append(ingress, fmt.Sprintf("2001:db8:eeee::%x", i+1))
	}
	f.publishedFor = map[string][]string{"tenant/squat": append(ingress, onB)} // LB-IPAM grants the waiting request last
	f.catchUp()
	changed()
	if !f.emptyQueue() { // past the bound: Writer.Concerned reads the kept /112
		t.Errorf("tenant/squat's load balancer publishing %s past the cache's bound queued no pass over home", onB)
	}
	t.Logf("the pass that sees it wrote %q", pass())
	f.report(3, prefixB) // the drain ends
	f.publish("192.0.2.7")
	t.Logf("the drain's end wrote %q", pass())
	if got := f.service()[holdings.AnnotationTarget]; got == onB {
		t.Errorf("web's DNS target is %s once A's drain ended: published for tenant/squat (its 65th ingress entry)", onB)
	}
	if c := f.condition(render.ServiceAddressConflict); c.Status != metav1.ConditionTrue {
		t.Errorf("%s %s %q, want True naming tenant/squat", render.ServiceAddressConflict, c.Status, c.Message)
	}
	if r := f.condition(render.Ready); r.Status != metav1.ConditionFalse {
		t.Errorf("Ready %s %q while web's address is published for tenant/squat", r.Status, r.Message)
	}
}
