package controller

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// delegatedWithSubnet makes home's delegation a /56 with one subnet, name,
// at offset 0xff (an honest admin's edit: a first definition, or a rename).
func delegatedWithSubnet(t *testing.T, f *fixture, name string) {
	t.Helper()
	u, err := f.dyn.Resource(api.GVR).Get(t.Context(), "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, int64(56), "spec", "acquisition", "routerAdvertisement", "delegatedPrefixLength"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": name, "offset": int64(255), "prefixLength": int64(64)}}, "spec", "subnets"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(api.GVR).Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// annotate merge-patches the metadata of Service ns/name (JSON members).
func annotate(t *testing.T, f *fixture, ns, name, metadata string) {
	t.Helper()
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace(ns).Patch(t.Context(), name, "application/merge-patch+json",
		[]byte(`{"metadata":{`+metadata+`}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Issue 42 (red team r6a), the admin renames a subnet honestly: web's
// remembered placement (render.Given.Placed) names the subnet by its name,
// and Given.Following resolves it against the spec of this pass - "a
// placement the model no longer resolves follows nowhere". While web's
// owner has not yet followed the rename (web absent: InvalidServiceAnnotations),
// the prefix is renumbered with no drain: web's absent ask keeps its address
// on A (given) but is offered nothing on B, so a younger tenant copying the
// renamed subnet and web's suffix is given web's next address, holds it by
// the writer (HeldByWriter), and when web follows the rename its ask names
// an address the writer gave another: it holds nothing by the writer and
// loses it for the term - whatever the ages (web is the older here). Wanted:
// a placement remembered by what it resolved to (the subnet's offset and
// length, the range's bounds), not by a name the admin may change; web
// keeps its address on B.
func TestRT6AWebKeepsItsNextAddressAcrossASubnetRename(t *testing.T) {
	const onA, onB = "2001:db8:a:ff:ffff::1", "2001:db8:b:ff:ffff::1"
	f := tenantOlderThanWeb(t)
	pass := func() {
		t.Helper()
		f.catchUp()
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	delegatedWithSubnet(t, f, "lb6")
	annotate(t, f, "default", "web", `"creationTimestamp":"2020-01-01T00:00:00Z","annotations":{"dynamic-prefix.io/service-subnet":"lb6"}`)
	pass()
	f.publish("192.0.2.7", onA)
	pass()
	if got := f.service()[holdings.AnnotationIPs]; !strings.Contains(got, onA) {
		t.Fatalf("before: web has %q, want %s", got, onA)
	}
	delegatedWithSubnet(t, f, "svc") // the admin renames the subnet; web has not followed yet
	pass()
	annotate(t, f, "tenant", "old", `"creationTimestamp":"2026-11-28T00:00:00Z","annotations":{"dynamic-prefix.io/service-subnet":"svc","dynamic-prefix.io/suffix":"::ffff:0:0:1"}`)
	pass()
	f.report(3, prefixB) // renumbered with no drain
	pass()
	pass()
	annotate(t, f, "default", "web", `"annotations":{"dynamic-prefix.io/service-subnet":"svc"}`) // web follows the rename
	pass()
	pass()
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(t.Context(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := f.service()[holdings.AnnotationIPs]
	t.Logf("web %q target %q; tenant/old %q", got, f.service()[holdings.AnnotationTarget], old.Annotations[holdings.AnnotationIPs])
	if !strings.Contains(got, onB) {
		t.Errorf("default/web (older) has %q, want its next address %s: the younger tenant/old (%q) was given it while web's remembered subnet name no longer resolved",
			got, onB, old.Annotations[holdings.AnnotationIPs])
	}
}

// Issue 42 (red team r6a), a Gateway out of one pass: the fourth and fifth
// red teams' absent ask (absentAsk) covers a Service whose annotations do
// not render, not a pool of a claiming kind - a Gateway whose plan fails
// (claimantAsks: w.pool reports it, InvalidPoolReference) asks for nothing
// and holds nothing in that pass. The admin renames the subnet web's
// Gateway is on; before its owner follows, a younger tenant Service asking
// for the Gateway's address (the renamed subnet and the Gateway's suffix) is
// given it; when the Gateway follows, its ask names an address the writer
// gave another and it holds at most by its echo (HeldByEcho), below the
// tenant's HeldByWriter: the Gateway is released and the tenant keeps its
// address for the term. Wanted: a Gateway out of one pass keeps what the
// writer gave it (and its placement renumbered), as a Service does.
func TestRT6AGatewayOutOfOnePassKeepsItsAddress(t *testing.T) {
	const gwA = "2001:db8:a:ff:ffff::2"
	f := tenantOlderThanWeb(t)
	g := addGateway(t, f, "default", "web", "::ffff:0:0:2", "2020-01-01T00:00:00Z")
	setSubnet := func(subnet string) {
		t.Helper()
		u, err := f.dyn.Resource(gatewayGVR).Namespace("default").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ann := u.GetAnnotations()
		ann["dynamic-prefix.io/service-subnet"] = subnet
		u.SetAnnotations(ann)
		if _, err := f.dyn.Resource(gatewayGVR).Namespace("default").Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pass := func() { t.Helper(); g.pass() }
	delegatedWithSubnet(t, f, "lb6")
	setSubnet("lb6")
	pass()
	pass()
	if got, _ := g.holds()["addresses"].([]string); !slices.Contains(got, gwA) {
		t.Fatalf("before: the Gateway holds %v, want %s", g.holds(), gwA)
	}
	delegatedWithSubnet(t, f, "svc") // the admin renames the subnet; the Gateway has not followed yet
	annotate(t, f, "tenant", "old", `"creationTimestamp":"2026-11-28T00:00:00Z","annotations":{"dynamic-prefix.io/service-subnet":"svc","dynamic-prefix.io/suffix":"::ffff:0:0:2"}`)
	pass()
	f.publishedFor = map[string][]string{"tenant/old": {gwA}} // LB-IPAM grants what the writer asked for it
	pass()
	setSubnet("svc") // the Gateway's owner follows the rename
	pass()
	pass()
	gatewayKeeps(t, f, g, gwA, "was out of one pass")
}

// Issue 42 (red team r6a), TestAnAbsentServiceIsWeighedAddressByAddress
// across a new leader term (a failover or an upgrade, any time after the
// renumbering - not the documented window of a new term meeting a
// renumbering with no drain before its first pass). The absent tenant's
// own lbipam.cilium.io/ips won it web's next address from its load
// balancer before the writer asked for it (the pool got B, the tenant's
// request was waiting), and the load balancer keeps it for the tenant: the
// writer never writes an absent Service. Within the term the writer's
// memory gives web both addresses; a new term reads who holds them from
// the load balancers: the tenant's split ask [onB] holds by its status
// (HeldByStatus, a status its own annotation chose), web's ask [onB, onA]
// by its status too (onA), and the tenant is older: it claims onB first and
// web loses its whole claim, onA - still draining - with it. Wanted: web
// keeps onA at least (the loser keeps what nobody else asks for), and an
// absent Service's status weighs no more than an echo of its owner's choice
// (HeldByEcho): the writer no longer writes its lbipam.cilium.io/ips.
func TestRT6AnAbsentTenantsGrantedNextAddressDoesNotTakeWebsClaimAtANewTerm(t *testing.T) {
	f := absentOnPurpose(t, "")
	f.report(3, prefixB, prefixA)
	for range 2 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	if got := f.service()[holdings.AnnotationIPs]; !strings.Contains(got, onB) || !strings.Contains(got, onA) {
		t.Fatalf("before the new term: default/web has %q, want %s and %s", got, onB, onA)
	}
	f.ctl.write.Forget() // a new leader term
	for range 2 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	got := f.service()[holdings.AnnotationIPs]
	t.Logf("web %q target %q", got, f.service()[holdings.AnnotationTarget])
	if !strings.Contains(got, onA) {
		t.Errorf("default/web has %q after a new term, want at least its draining address %s: the absent tenant/old, older, holding web's next address by a status its own annotation chose, took web's whole claim", got, onA)
	}
}

// Issue 42 (red team r6a), the same with the tenant present: tenant/old,
// older, copies web's suffix; its own lbipam.cilium.io/ips (a user entry,
// not absent: the writer keeps a user's entries) asked for web's next
// address before the renumbering and its load balancer granted it first.
// Within the term web holds both by the writer; just before a failover the
// tenant writes its managed-ips record naming that address (its owner's
// annotation), so its ask is web's [onB, onA]. The new term's first pass
// reads holds from the load balancers: both by status, the tenant older -
// it takes web's whole claim.
func TestRT6ATenantsGrantedNextAddressDoesNotTakeWebsClaimAtANewTerm(t *testing.T) {
	f := grantedWebsNext(t, `"dynamic-prefix.io/suffix":"::ffff:0:0:1",`)
	if got := f.service()[holdings.AnnotationIPs]; !strings.Contains(got, onB) || !strings.Contains(got, onA) {
		t.Fatalf("before the new term: default/web has %q, want %s and %s", got, onB, onA)
	}
	annotate(t, f, "tenant", "old", `"annotations":{"dynamic-prefix.io/managed-ips":"`+onB+`"}`)
	f.catchUp()
	f.ctl.write.Forget() // a new leader term
	for range 2 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(t.Context(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := f.service()[holdings.AnnotationIPs]
	t.Logf("web %q target %q; tenant/old %q record %q", got, f.service()[holdings.AnnotationTarget], old.Annotations[holdings.AnnotationIPs], old.Annotations[holdings.AnnotationManagedIPs])
	if !strings.Contains(got, onA) {
		t.Errorf("default/web has %q after a new term, want at least its draining address %s: the older tenant/old, holding web's next address by a status its own lbipam.cilium.io/ips chose, took web's whole claim", got, onA)
	}
}

// Issue 42 (red team r6a), within one term: docs/security.md says a tenant
// whose load balancer published an address for it directly ranks with the
// holder only where the writer's memory is gone. The tenant's Service
// (present, not copying web's suffix: it asks for nothing of web's) lists
// web's next address as a user entry of its own lbipam.cilium.io/ips, which
// the writer keeps; waiting when the pool gets B (the status names B first,
// while admission catches up), it is granted by its load balancer before
// the writer asks for it for web. The writer's memory gives web the address
// - in its claims; the load balancer publishes it for the tenant, never for
// web. When A's drain ends, the writer points web's DNS target at it (web's
// traffic to the tenant's Service) and reports Ready, "every object in
// step"; nothing names the tenant. Wanted: an address the writer gave web
// that the load balancer publishes for another object is not web's DNS
// target, and is reported (ServiceAddressConflict naming the other; not
// Ready).
func TestRT6AWebsTargetIsNotAnAddressPublishedForATenant(t *testing.T) {
	f := grantedWebsNext(t, "")
	f.report(3, prefixB)   // the drain ends
	f.publish("192.0.2.7") // LB-IPAM: A left the pool; B is the tenant's
	for range 2 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(t.Context(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(old.Annotations[holdings.AnnotationIPs], onB) {
		t.Fatalf("tenant/old's own entry %s is gone: %q", onB, old.Annotations[holdings.AnnotationIPs])
	}
	target := f.service()[holdings.AnnotationTarget]
	t.Logf("web %q target %q; tenant/old %q; Ready: %s", f.service()[holdings.AnnotationIPs], target, old.Annotations[holdings.AnnotationIPs], f.condition("Ready").Message)
	if target == onB {
		t.Errorf("default/web's DNS target is %s, which its load balancer publishes for tenant/old, not for web", onB)
	}
	if f.condition("Ready").Status == metav1.ConditionTrue {
		t.Errorf("Ready %q while web's address %s is published for tenant/old", f.condition("Ready").Message, onB)
	}
}

// grantedWebsNext is tenantOlderThanWeb with web published on A and
// tenant/old's own lbipam.cilium.io/ips naming web's next address (more of
// its annotations: extra, JSON members each with a trailing comma), which
// its load balancer grants when the pool gets B: renumbered (A draining),
// two passes run.
func grantedWebsNext(t *testing.T, extra string) *fixture {
	t.Helper()
	f := tenantOlderThanWeb(t)
	f.publish("192.0.2.7", onA)
	annotate(t, f, "tenant", "old", `"annotations":{`+extra+`"lbipam.cilium.io/ips":"`+onB+`"}`)
	f.catchUp()
	t.Logf("the pass before wrote %q", f.sync(passHome))
	f.catchUp()
	f.report(3, prefixB, prefixA)
	f.publishedFor = map[string][]string{"tenant/old": {onB}}
	for range 2 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	return f
}
