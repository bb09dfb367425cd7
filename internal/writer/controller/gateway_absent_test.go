package controller

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Issue 42 (red team r6a F4), a Gateway that cannot be read for one pass
// (its owner garbled spec.addresses: InvalidPool, never written) asks as an
// absent Service does: it keeps the address the writer gave it, so a younger
// tenant Service asking for it meanwhile (the Gateway's suffix) is not given
// it, and the Gateway, readable again, keeps it. Before, it asked for
// nothing: the tenant was given the address, held it by the writer, and the
// Gateway was released when it could be read again.
func TestAnUnreadableGatewayKeepsItsAddress(t *testing.T) {
	const gwA = "2001:db8:a:0:ffff::2"
	f := tenantOlderThanWeb(t)
	g := addGateway(t, f, "default", "web", "::ffff:0:0:2", "2020-01-01T00:00:00Z")
	pass := func() {
		t.Helper()
		g.catchUp()
		t.Logf("the pass wrote %q", f.sync(passHome))
		g.catchUp()
	}
	addresses := func(edit func([]any) []any) {
		t.Helper()
		u, err := f.dyn.Resource(gatewayGVR).Namespace("default").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, _, _ := unstructured.NestedSlice(u.Object, "spec", "addresses")
		if err := unstructured.SetNestedSlice(u.Object, edit(a), "spec", "addresses"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.dyn.Resource(gatewayGVR).Namespace("default").Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	pass()
	if got, _ := g.holds()["addresses"].([]string); !slices.Contains(got, gwA) {
		t.Fatalf("before: the Gateway holds %v, want %s", g.holds(), gwA)
	}
	addresses(func(a []any) []any { return append(a, "garbled") }) // its owner garbles it: unreadable
	annotate(t, f, "tenant", "old", `"creationTimestamp":"2026-11-28T00:00:00Z","annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:2"}`)
	pass()
	if !slices.Contains(f.events.warnings, "InvalidPool web") {
		t.Fatalf("the garbled Gateway was not reported unreadable: warnings %q", f.events.warnings)
	}
	f.publishedFor = map[string][]string{"tenant/old": {gwA}} // LB-IPAM grants what the writer asked for it
	pass()
	addresses(func(a []any) []any { return a[:len(a)-1] }) // readable again
	pass()
	pass()
	if ips := gatewayKeeps(t, f, g, gwA, "could not be read"); strings.Contains(ips, gwA) {
		t.Errorf("tenant/old holds %q, want no %s", ips, gwA)
	}
}

// gatewayKeeps checks that the Gateway g, older, holds address, which the
// younger tenant/old asked for while g was out of a pass (why); it returns
// what tenant/old holds.
func gatewayKeeps(t *testing.T, f *fixture, g *gatewayFixture, address, why string) string {
	t.Helper()
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(t.Context(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips := old.Annotations[holdings.AnnotationIPs]
	t.Logf("gateway holds %v; tenant/old %q", g.holds(), ips)
	if got, _ := g.holds()["addresses"].([]string); !slices.Contains(got, address) {
		t.Errorf("Gateway %s/%s (older) holds %v, want %s: the younger tenant/old (%q) was given it while the Gateway %s", g.ns, g.name, got, address, ips, why)
	}
	return ips
}
