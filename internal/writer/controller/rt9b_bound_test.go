package controller

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
)

// Red team r9b (the bounded caches, s29-bounds): past 64 addresses the
// caches keep only the prefixes the rest fall in - at most 8 /112s, else
// their /64s, else ::/0 - and take the object to publish every address
// inside them (backends.PublishedFor). A tenant decides how many addresses
// its load balancer publishes and where (its own lbipam.cilium.io/ips, on
// any pool that serves its namespace), so it decides the summary: 64
// addresses anywhere and nine more, one on each of nine /64s, make its
// Service "publish" ::/0. The tenant's Service follows no DynamicPrefix and
// is nowhere near home's prefix. web follows home; no load balancer
// publishes anything for it (not of type LoadBalancer, or its load
// balancer not answering: the fixture's steady state, where web's DNS
// target is its address). Every address the writer gives web now reads as
// published for tenant/squat: web loses its DNS target, home goes Ready
// False with AddressPublishedForAnother naming the tenant - and stays so
// for as long as the tenant likes, since nothing will ever publish web's
// address for web (docs/security.md prices the bound only "while a
// Service's own load balancer has not yet published" its address, and
// only for a Service next to the tenant's surplus). Every Service of every
// DynamicPrefix in the cluster is in the same place. Wanted: an address no
// load balancer publishes for anyone is nobody else's.
func TestRT9BATenantsSurplusSummarisedAsEverythingTakesNoDNSTarget(t *testing.T) {
	f := converged(t, generous)
	const onA = "2001:db8:a:0:ffff::1"
	if got := f.service()[holdings.AnnotationTarget]; got != onA {
		t.Fatalf("before: web's DNS target is %q, want %s", got, onA)
	}
	changed := squatter(t, f, "")
	var ingress []string
	for i := range 64 {
		ingress = append(ingress, fmt.Sprintf("2001:db8:eeee::%x", i+1))
	}
	for i := range 9 { // nine /64s past the bound: the summary is ::/0
		ingress = append(ingress, fmt.Sprintf("2001:db8:eeee:%x::1", i+1))
	}
	f.publishedFor = map[string][]string{"tenant/squat": ingress}
	f.catchUp()
	changed()
	for range 2 {
		t.Logf("the pass wrote %q", f.settle(passHome))
	}
	webKeepsItsTarget(t, f, onA, "tenant/squat's 73 addresses elsewhere, summarised as ::/0,")
}

// webKeepsItsTarget checks that web's DNS target is still onA, which no
// load balancer publishes for anyone, and home reports no conflict over it,
// whatever surplus (what, in the messages) a tenant's load balancer
// publishes elsewhere.
func webKeepsItsTarget(t *testing.T, f *fixture, onA, what string) {
	t.Helper()
	ann := f.service()
	t.Logf("web: target %q; %s: %s", ann[holdings.AnnotationTarget], render.Ready, f.condition(render.Ready).Message)
	if got := ann[holdings.AnnotationTarget]; got != onA {
		t.Errorf("web's DNS target is %q, want %s: no load balancer publishes it for anyone, yet %s are taken to publish it", got, onA, what)
	}
	if c := f.condition(render.ServiceAddressConflict); c.Status == metav1.ConditionTrue {
		t.Errorf("%s %s %q: a conflict over an address nobody's load balancer publishes", render.ServiceAddressConflict, c.Reason, c.Message)
	}
}

// The Gateway twin of the test above (issue 42, left by s30-bounded): a
// tenant's Gateway following home with a suffix of its own (the cache
// keeps what the controller of a Gateway that follows echoes) is echoed
// the 73 addresses the tenant asked LB-IPAM for on the Service Cilium
// generates for it - 64 anywhere and nine more on nine /64s far from home. The
// Service cache keeps that Service's surplus only inside the
// DynamicPrefixes' space; the Gateway cache kept its status.addresses
// summarised as ::/0, so the Gateway "published" every address: web lost
// its DNS target to it. Wanted: as for the Service, a surplus outside the
// space is nobody's claim on web's address.
func TestATenantsGatewaySurplusSummarisedAsEverythingTakesNoDNSTarget(t *testing.T) {
	f := converged(t, generous)
	const onA = "2001:db8:a:0:ffff::1"
	if got := f.service()[holdings.AnnotationTarget]; got != onA {
		t.Fatalf("before: web's DNS target is %q, want %s", got, onA)
	}
	g := addGateway(t, f, "tenant", "squat", "::ffff:0:0:77", "")
	var echoed []string
	for i := range 64 {
		echoed = append(echoed, fmt.Sprintf("2001:db8:eeee::%x", i+1))
	}
	for i := range 9 { // nine /64s past the bound: summarised by /64s no more
		echoed = append(echoed, fmt.Sprintf("2001:db8:eeee:%x::1", i+1))
	}
	g.ciliumPublishes(echoed...)
	for range 2 {
		g.pass()
	}
	t.Logf("Gateway tenant/squat holds %v", g.holds())
	if who := backends.PublishedFor(f.svcs, []backends.Cached{{Kind: g.kind, Store: g.store}}, onA); len(who) > 0 {
		t.Errorf("web's address %s reads as published for %q: the tenant's surplus, none of it in the space (%s, %s), is kept as a prefix that holds it", onA, who, prefixA, prefixB)
	}
	webKeepsItsTarget(t, f, onA, "Gateway tenant/squat's 73 echoed addresses elsewhere")
}
