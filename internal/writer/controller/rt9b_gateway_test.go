package controller

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// held Service does; nothing of its is taken out. (The Gateway's controller
// is Cilium's: what it echoes, LB-IPAM publishes for the Service it
// generated, default/cilium-gateway-gw - what the writer counts as
// published for the Gateway; an echo alone is its owner's to steer.)
func TestRT9BAGatewayWhoseNextAddressATenantRacedKeepsItsDrainingAddressAtANewTerm(t *testing.T) {
	f := tenantOlderThanWeb(t)
	g := addGateway(t, f, "default", "gw", "::ffff:0:0:2", "2026-10-01T00:00:00Z")
	const gwA, gwB = "2001:db8:a:0:ffff::2", "2001:db8:b:0:ffff::2"
	g.pass()
	if got, _ := g.holds()["addresses"].([]string); !slices.Contains(got, gwA) {
		t.Fatalf("before: the Gateway holds %q, want %s", got, gwA)
	}
	// Its controller publishes what LB-IPAM grants the Service it
	// generated for the Gateway (default/cilium-gateway-gw), beside the
	// user's IPv4 address.
	echo := func(addrs ...string) { g.ciliumPublishes(append([]string{"192.0.2.8"}, addrs...)...) }
	echo(gwA)
	// The tenant's own entry, waiting for the Gateway's next address.
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(t.Context(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tenantA := old.Annotations[holdings.AnnotationIPs]
	annotate(t, f, "tenant", "old", `"annotations":{"lbipam.cilium.io/ips":"`+tenantA+","+gwB+`"}`)
	f.publishedFor["tenant/old"] = []string{tenantA}
	g.pass()

	f.report(3, prefixB, prefixA)
	g.pass() // the renumbering: the Gateway asks for gw on B
	const tenantB = "2001:db8:b:0:ffff::99"
	f.publishedFor["tenant/old"] = []string{tenantB, tenantA, gwB} // LB-IPAM grants the waiting entry first
	echo(gwA)                                                      // gw on B went to the tenant
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

// Red team r9b: red team r7a's F2 on a Gateway. The claims' possession
// (apply.publishers) reads only Services' load balancers (Seen.Published);
// what a Gateway's controller publishes for it (status.addresses,
// Seen.Echoed) is not "published for another", so neither of offer's guards
// holds for it: a tenant's draining address renumbered onto the Gateway's
// current one keeps its HeldByEarlierStatus, which outranks the Gateway's
// echo. The Gateway gw was recreated while A drained, so the tenant's own
// lbipam.cilium.io/ips took gw's address on A while it was free; gw's
// controller publishes gw on B alone. At a new term the tenant follows
// with gw's suffix: the writer writes gw on B - published for the Gateway
// - onto the tenant's Service, and releases the Gateway, whose generated
// Service then lets it go at the load balancer, where the tenant's request
// waits for it. The Service version of this
// (TestAtANewTermTheTenantsAddressOnTheDrainingPrefixTakesNothingOfWebs)
// passes. Wanted: no tenant is written an address a Gateway's controller
// publishes for the Gateway - LB-IPAM publishes it for the Service Cilium's
// controller generated, default/cilium-gateway-gw; the Gateway keeps it.
func TestRT9BAtANewTermTheTenantsAddressOnTheDrainingPrefixTakesNothingOfAGateways(t *testing.T) {
	f := tenantOlderThanWeb(t)
	const gwA, gwB = "2001:db8:a:0:ffff::2", "2001:db8:b:0:ffff::2"
	f.report(3, prefixB, prefixA)
	f.settle(passHome)
	g := addGateway(t, f, "default", "gw", "::ffff:0:0:2", "2026-11-20T00:00:00Z") // recreated during the drain
	g.pass()                                                                       // the writer gives it gw on B and on A
	annotate(t, f, "tenant", "old", `"annotations":{"lbipam.cilium.io/ips":"`+gwA+`"}`)
	f.publishedFor = map[string][]string{"tenant/old": {gwA}} // free on A when gw was recreated: granted to the tenant first
	g.pass()
	g.ciliumPublishes("192.0.2.8", gwB) // LB-IPAM grants gw on B to its generated Service; its controller serves it
	g.pass()
	if got, _ := g.holds()["addresses"].([]string); !slices.Contains(got, gwB) {
		t.Fatalf("before the new term: the Gateway holds %q, want %s", got, gwB)
	}
	annotate(t, f, "tenant", "old", `"annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:2"}`)
	f.ctl.write.Forget() // a new leader term
	for range 2 {
		g.pass()
	}
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(t.Context(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := g.holds()["addresses"].([]string)
	t.Logf("the Gateway holds %q; tenant/old has %q; %s", got, old.Annotations[holdings.AnnotationIPs], f.condition("ServiceAddressConflict").Message)
	if slices.Contains(strings.Split(old.Annotations[holdings.AnnotationIPs], ","), gwB) {
		t.Errorf("tenant/old was written %s, which the Gateway's controller publishes for default/gw: %q", gwB, old.Annotations[holdings.AnnotationIPs])
	}
	if !slices.Contains(got, gwB) {
		t.Errorf("the Gateway holds %q after a new term, want %s, which its controller publishes for it", got, gwB)
	}
}
