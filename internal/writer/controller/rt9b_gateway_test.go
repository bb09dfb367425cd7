package controller

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Red team r9b (possession, s29-possession): possessed holds a Service
// whose next address another's load balancer publishes - it keeps what its
// own load balancer publishes for it, nothing is written - but a Gateway
// has nothing in seen.Published (its controller's status is an echo,
// Seen.Echoed), so possessed bars it: released, whole. The sixth red
// team's race, aimed at an honest Gateway: a tenant's Service following
// home with a suffix of its own lists the Gateway's next address (gw on B)
// in its own lbipam.cilium.io/ips, waiting; when the pool gains B, LB-IPAM
// grants it to the tenant before the Gateway's generated Service asks.
// Within the term the writer's memory gives gw on B to the Gateway. Then a
// new leader term (a failover, an upgrade), still during A's drain: the
// Gateway asks for gw on B (published for the tenant, no memory gives it
// the Gateway) and is barred - the writer takes every address of its own
// out of the Gateway's spec.addresses, its draining address too, which its
// controller still serves. A Service in the Gateway's place is held and
// keeps its draining address (TestRT6ATenantsGrantedNextAddressDoesNotTakeWebsClaimAtANewTerm);
// the tenant needs no age, no copy of the suffix, nothing but the race the
// brief calls known (which costs a Service Ready, not its address). Wanted:
// the Gateway keeps what its controller publishes for it (gw on A), as a
// held Service does; nothing of its is taken out.
func TestRT9BAGatewayWhoseNextAddressATenantRacedKeepsItsDrainingAddressAtANewTerm(t *testing.T) {
	f := tenantOlderThanWeb(t)
	g := addGateway(t, f, "default", "gw", "::ffff:0:0:2", "2026-10-01T00:00:00Z")
	const gwA, gwB = "2001:db8:a:0:ffff::2", "2001:db8:b:0:ffff::2"
	g.pass()
	if got, _ := g.holds()["addresses"].([]string); !slices.Contains(got, gwA) {
		t.Fatalf("before: the Gateway holds %q, want %s", got, gwA)
	}
	echo := func(addrs ...string) { // its controller publishes what it serves
		t.Helper()
		u, err := f.dyn.Resource(gatewayGVR).Namespace("default").Get(t.Context(), "gw", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var list []any
		for _, a := range append([]string{"192.0.2.8"}, addrs...) {
			list = append(list, map[string]any{"type": "IPAddress", "value": a})
		}
		if err := unstructured.SetNestedSlice(u.Object, list, "status", "addresses"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.dyn.Resource(gatewayGVR).Namespace("default").Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		g.catchUp()
	}
	echo(gwA)
	// The tenant's own entry, waiting for the Gateway's next address.
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(t.Context(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tenantA := old.Annotations[holdings.AnnotationIPs]
	annotate(t, f, "tenant", "old", `"annotations":{"lbipam.cilium.io/ips":"`+tenantA+","+gwB+`"}`)
	f.publishedFor = map[string][]string{"tenant/old": {tenantA}}
	g.pass()

	f.report(3, prefixB, prefixA)
	g.pass() // the renumbering: the Gateway asks for gw on B
	const tenantB = "2001:db8:b:0:ffff::99"
	f.publishedFor = map[string][]string{"tenant/old": {tenantB, tenantA, gwB}} // LB-IPAM grants the waiting entry first
	echo(gwA)                                                                   // gw on B went to the tenant
	g.pass()
	g.pass()
	within, _ := g.holds()["addresses"].([]string)
	t.Logf("within the term the Gateway holds %q", within)
	if !slices.Contains(within, gwA) || !slices.Contains(within, gwB) {
		t.Fatalf("within the term the Gateway holds %q, want %s and %s (the writer's memory gives them)", within, gwB, gwA)
	}

	f.ctl.write.Forget() // a new leader term, A still draining
	for range 3 {
		g.pass()
	}
	got, _ := g.holds()["addresses"].([]string)
	t.Logf("after the new term: the Gateway holds %v; %s", g.holds(), f.condition("ServiceAddressConflict").Message)
	if !slices.Contains(got, gwA) {
		t.Errorf("the Gateway holds %q after a new term: its draining address %s, which its controller publishes, was taken out (the tenant's load balancer publishes its next one, %s)", got, gwA, gwB)
	}
}
