package controller

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Red team, round 2 (issue 42, one tenant): render.HoldOf reads a Gateway's
// status.addresses as a hold as strong as a Service's
// status.loadBalancer.ingress, and breaks a tie between two status holds by
// age. But what a Gateway controller publishes there is what the Gateway's
// spec.addresses asked for - the tenant's own field (a controller reporting
// the addresses it was told to serve, or LB-IPAM having answered the
// Gateway's Service while web's was free, e.g. during a renumbering). A new
// leader term (a failover, an upgrade) forgets what the writer gave: web
// and the tenant's older Gateway then both "hold" web's address by status,
// and the older - the tenant's - takes it.
func TestRT2AnOlderGatewayPublishingWebsAddressTakesItAtANewTerm(t *testing.T) {
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
	g := addGateway(t, f, "tenant", "gw", "::ffff:0:0:1", "2025-01-01T00:00:00Z")
	u, err := f.dyn.Resource(gatewayGVR).Namespace("tenant").Get(t.Context(), "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The tenant writes web's address into its own spec.addresses and its
	// record; its Gateway controller publishes what the spec asks.
	ann := u.GetAnnotations()
	ann[holdings.AnnotationManagedIPs] = svcA
	u.SetAnnotations(ann)
	addrs := []any{map[string]any{"type": "IPAddress", "value": "192.0.2.8"}, map[string]any{"type": "IPAddress", "value": svcA}}
	if err := unstructured.SetNestedSlice(u.Object, addrs, "spec", "addresses"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(u.Object, addrs, "status", "addresses"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(gatewayGVR).Namespace("tenant").Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
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
