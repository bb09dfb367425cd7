package controller

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Issue 42, one tenant: TestAServiceThatHoldsItsAddressKeepsIt's
// forged record, on a Gateway (the claims weigh both kinds alike, and the
// Gateway's dynamic-prefix.io/managed-ips is its owner's annotation too). A
// record naming an address the Gateway's spec.addresses lacks is dropped, so
// the tenant puts web's address in both - both its own fields. An older
// Gateway copying web's suffix so takes the address from default/web (and
// gets its DNS targets and LB-IPAM annotation written for it).
func TestAGatewaysOwnRecordTakesNoServicesAddress(t *testing.T) {
	f := converged(t, generous)
	svcA := "2001:db8:a:0:ffff::1"
	// The victim's Service was (re)created on 2026-11-01.
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(t.Context(), "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"creationTimestamp":"2026-11-01T00:00:00Z"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	g := olderGatewayNaming(t, f, svcA, false)
	g.catchUp()
	for range 3 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		g.catchUp()
		f.catchUp()
		t.Logf("web %q; gw holds %v", f.service()[holdings.AnnotationIPs], g.holds())
	}
	if ips := f.service()[holdings.AnnotationIPs]; !strings.Contains(ips, svcA) {
		t.Errorf("default/web lost %s: %q", svcA, ips)
	}
	if got, _ := g.holds()["addresses"].([]string); slices.Contains(got, svcA) {
		t.Errorf("Gateway tenant/gw holds %q: a record it wrote itself took web's address", got)
	}
}

// olderGatewayNaming adds the tenant's Gateway tenant/gw, created before
// web, copying web's suffix and naming web's address svcA in what its
// owner writes: its record and its spec.addresses - and, when echoed, in
// its status.addresses too, as a Gateway controller publishing its spec
// would.
func olderGatewayNaming(t *testing.T, f *fixture, svcA string, echoed bool) *gatewayFixture {
	t.Helper()
	g := addGateway(t, f, "tenant", "gw", "::ffff:0:0:1", "2025-01-01T00:00:00Z")
	u, err := f.dyn.Resource(gatewayGVR).Namespace("tenant").Get(t.Context(), "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ann := u.GetAnnotations()
	ann[holdings.AnnotationManagedIPs] = svcA
	u.SetAnnotations(ann)
	addrs := []any{map[string]any{"type": "IPAddress", "value": "192.0.2.8"}, map[string]any{"type": "IPAddress", "value": svcA}}
	if err := unstructured.SetNestedSlice(u.Object, addrs, "spec", "addresses"); err != nil {
		t.Fatal(err)
	}
	if echoed {
		if err := unstructured.SetNestedSlice(u.Object, addrs, "status", "addresses"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.dyn.Resource(gatewayGVR).Namespace("tenant").Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return g
}

// Issue 42, one tenant: what a Gateway controller publishes in
// status.addresses is what the Gateway's spec.addresses asked for - the
// tenant's own field. A new leader term (a failover, an upgrade) forgets
// what the writer gave; web's load balancer status must then outweigh the
// tenant's older Gateway echoing web's address (render.HeldByEcho ranks
// below HeldByStatus). Before, both "held" it by status, the tie went to
// age, and the tenant's Gateway took web's address and DNS target.
func TestAnOlderGatewayEchoingWebsAddressDoesNotTakeItAtANewTerm(t *testing.T) {
	f := converged(t, generous)
	svcA := "2001:db8:a:0:ffff::1"
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(t.Context(), "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"creationTimestamp":"2026-11-01T00:00:00Z"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// web's load balancer publishes its address (LB-IPAM wrote it).
	f.publish("192.0.2.7", svcA)
	f.sync(passHome)
	f.catchUp()
	if ips := f.service()[holdings.AnnotationIPs]; !strings.Contains(ips, svcA) {
		t.Fatalf("before: web has %q", ips)
	}
	// The tenant's Gateway controller publishes what its spec asks.
	g := olderGatewayNaming(t, f, svcA, true)
	g.catchUp()
	// Within the term, what the writer gave holds web's address.
	t.Logf("the pass wrote %q", f.sync(passHome))
	g.catchUp()
	f.catchUp()
	if ips := f.service()[holdings.AnnotationIPs]; !strings.Contains(ips, svcA) {
		t.Fatalf("within the term web lost %s: %q", svcA, ips)
	}
	// A new leader term.
	f.ctl.write.Forget()
	for range 3 {
		t.Logf("the new term's pass wrote %q", f.sync(passHome))
		g.catchUp()
		f.catchUp()
		t.Logf("web %q; gw holds %v", f.service()[holdings.AnnotationIPs], g.holds())
	}
	if ips := f.service()[holdings.AnnotationIPs]; !strings.Contains(ips, svcA) {
		t.Errorf("default/web lost %s at a new term: %q", svcA, ips)
	}
	if got, _ := g.holds()["addresses"].([]string); slices.Contains(got, svcA) {
		t.Errorf("Gateway tenant/gw holds %q: the tenant's own spec, echoed by its controller, took web's address", got)
	}
}

// A Gateway's controller publishes the addresses it serves in
// status.addresses, which the Gateway's owner cannot write: a new leader
// term, which forgot what it gave, reads the Gateway as holding its address
// from there, and an older Service copying the Gateway's suffix and writing
// the address into its own record gets none of it.
func TestANewTermReadsWhoHoldsAGatewaysAddressFromItsStatus(t *testing.T) {
	f := converged(t, generous)
	gwA := "2001:db8:a:0:ffff::3"
	g := addGateway(t, f, "tenant", "gw", "::ffff:0:0:3", "2026-11-01T00:00:00Z")
	f.sync(passHome)
	g.catchUp()
	if got, _ := g.holds()["addresses"].([]string); !slices.Contains(got, gwA) {
		t.Fatalf("before: the Gateway holds %q", got)
	}
	// Its controller publishes the address; web (from 2025) copies its suffix and address.
	u, err := f.dyn.Resource(gatewayGVR).Namespace("tenant").Get(t.Context(), "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "IPAddress", "value": "192.0.2.8"},
		map[string]any{"type": "IPAddress", "value": gwA}}, "status", "addresses"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(gatewayGVR).Namespace("tenant").Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(t.Context(), "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"creationTimestamp":"2025-01-01T00:00:00Z","annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:3","dynamic-prefix.io/managed-ips":"`+gwA+`"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	g.catchUp()
	f.ctl.write.Forget()
	for range 2 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		g.catchUp()
	}
	if got, _ := g.holds()["addresses"].([]string); !slices.Contains(got, gwA) {
		t.Errorf("Gateway tenant/gw lost %s: %q", gwA, got)
	}
	if ips := f.service()[holdings.AnnotationIPs]; strings.Contains(ips, gwA) {
		t.Errorf("default/web took the Gateway's %s with its own record: %q", gwA, ips)
	}
}
