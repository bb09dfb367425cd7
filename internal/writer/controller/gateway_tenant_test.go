package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
)

// allowNamespaces sets home's spec.serviceNamespaces, as the admin does.
func allowNamespaces(t *testing.T, f *fixture, ns ...string) {
	t.Helper()
	u, err := f.dyn.Resource(api.GVR).Get(t.Context(), "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var list []any
	for _, n := range ns {
		list = append(list, n)
	}
	if err := unstructured.SetNestedSlice(u.Object, list, "spec", "serviceNamespaces"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(api.GVR).Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// spec.serviceNamespaces is the admin's word on which namespaces follow a
// DynamicPrefix: a Gateway in a namespace it does not name is not written,
// and one that took an address before the admin named the namespaces gives
// it back, once, with the event a Service gets. Before, Gateways were
// written in any namespace.
func TestAGatewayInANamespaceNotNamedGetsNoAddress(t *testing.T) {
	f := newFixture(t, generous)
	g := addGateway(t, f, "tenant", "gw", "::ffff:0:0:3", "")
	f.report(3, prefixA)
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch gateways gw", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("with every namespace let follow, the first pass wrote %q, want %q", got, want)
	}
	g.catchUp()

	allowNamespaces(t, f, "default")
	g.catchUp()
	if got := f.sync(passHome); !slices.Equal(got, []string{"patch gateways gw"}) {
		t.Errorf("namespace tenant no longer named: the pass wrote %q, want the Gateway's release alone", got)
	}
	wantHolds := map[string]any{"addresses": []string{"192.0.2.8"}, "infrastructure": "192.0.2.8", "listeners": 1,
		"target": "", "alpha": "", "record": ""}
	if diff := cmp.Diff(wantHolds, g.holds()); diff != "" {
		t.Errorf("Gateway tenant/gw released (-want +got):\n%s", diff)
	}
	// Emptied, not removed: home lives, and renumber-writer-values refuses
	// the removal of a record from what follows it.
	if u, err := f.dyn.Resource(gatewayGVR).Namespace("tenant").Get(t.Context(), "gw", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if _, kept := u.GetAnnotations()[holdings.AnnotationManagedIPs]; !kept {
		t.Errorf("Gateway tenant/gw released with its record removed, while it follows home: want it emptied")
	}
	if !slices.Contains(f.events.reasons, "NamespaceNotAllowed gw") {
		t.Errorf("events %q, want NamespaceNotAllowed on gw", f.events.reasons)
	}
	g.catchUp()
	f.report(3, prefixB, prefixA)
	for _, w := range f.sync(passHome) {
		if strings.Contains(w, "gateways") {
			t.Errorf("a renumbering wrote the Gateway of a namespace not named: %q", w)
		}
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("at rest the pass wrote %q", got)
	}
}

// One address, one object, Services and Gateways together: a Gateway that
// copies the suffix of the Service default/web, which holds its address,
// gets none of it though it was created first - the condition
// ServiceAddressConflict names it, its event says who holds the address,
// and the Service keeps it through a renumbering, with nothing written at
// rest. Before, the Gateway was written the Service's address.
func TestAGatewayTakesNoServicesAddress(t *testing.T) {
	f := converged(t, generous)
	svcA := "2001:db8:a:0:ffff::1"
	g := addGateway(t, f, "tenant", "gw", "::ffff:0:0:1", "2025-01-01T00:00:00Z")
	if got := f.sync(passHome); !slices.Equal(got, []string{"patch dynamicprefixes/status home"}) {
		t.Errorf("the copying Gateway: the pass wrote %q, want the condition alone", got)
	}
	if got := g.holds()["addresses"]; !slices.Equal(got.([]string), []string{"192.0.2.8"}) {
		t.Errorf("Gateway tenant/gw holds %q: it took the Service's address", got)
	}
	c := f.condition(render.ServiceAddressConflict)
	if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, svcA+" is asked for by default/web and Gateway tenant/gw") {
		t.Errorf("condition %s %s %q, want True naming default/web and Gateway tenant/gw", render.ServiceAddressConflict, c.Status, c.Message)
	}
	if !slices.Contains(f.events.reasons, render.ServiceAddressConflict+" gw") {
		t.Errorf("events %q, want %s on gw", f.events.reasons, render.ServiceAddressConflict)
	}
	g.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("at rest, with the conflict standing, the pass wrote %q", got)
	}

	f.report(3, prefixB, prefixA)
	f.sync(passHome)
	g.catchUp()
	if ips := f.service()[holdings.AnnotationIPs]; !strings.Contains(ips, "2001:db8:b:0:ffff::1") || !strings.Contains(ips, svcA) {
		t.Errorf("after the renumbering default/web holds %q", ips)
	}
	if got := g.holds()["addresses"]; !slices.Equal(got.([]string), []string{"192.0.2.8"}) {
		t.Errorf("after the renumbering Gateway tenant/gw holds %q", got)
	}
}

// The other way round: a Gateway holds its address, and an older Service
// copies its suffix. The Gateway keeps it; the Service gets none. Before,
// both were written the one address.
func TestAServiceTakesNoGatewaysAddress(t *testing.T) {
	f := newFixture(t, generous)
	g := addGateway(t, f, "default", "gw", "::ffff:0:0:2", "2026-11-01T00:00:00Z")
	f.report(3, prefixA)
	f.sync(passHome)
	g.catchUp()
	gwA := "2001:db8:a:0:ffff::2"
	if got := g.holds()["record"]; got != gwA {
		t.Fatalf("Gateway default/gw's record %q, want %s", got, gwA)
	}
	// The Service web (zero creation time: older than any) copies the
	// Gateway's suffix.
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(t.Context(), "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.sync(passHome)
	g.catchUp()
	if ips := f.service()[holdings.AnnotationIPs]; strings.Contains(ips, gwA) {
		t.Errorf("Service default/web now holds Gateway default/gw's address: %q", ips)
	}
	if got := g.holds()["record"]; got != gwA {
		t.Errorf("Gateway default/gw's record %q, want it kept: %s", got, gwA)
	}
	c := f.condition(render.ServiceAddressConflict)
	if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, gwA+" is asked for by Gateway default/gw and default/web") {
		t.Errorf("condition %s %s %q, want True naming Gateway default/gw and default/web", render.ServiceAddressConflict, c.Status, c.Message)
	}
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("at rest the pass wrote %q", got)
	}
}

// The dry run that asks whether admission sees a new prefix (Writer.Admitted)
// is of a pool write, never a Gateway's: the value policy refuses every
// address to a Gateway in a namespace not named, so a tenant's Gateway there
// would read as "admission has not seen the status" and hold every object
// of the renumbering back, each time, until the wait's bound. Here home has
// no pool, one Service and that Gateway: the pass after the status is seen
// writes the Service.
func TestATenantsGatewayIsNotTheAdmissionDryRun(t *testing.T) {
	f := newFixture(t, generous)
	if err := f.dyn.Resource(poolGVR).Delete(t.Context(), "lb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g := addGateway(t, f, "tenant", "gw", "::ffff:0:0:3", "")
	allowNamespaces(t, f, "default")
	g.catchUp()
	f.report(3, prefixA)
	f.sync(passHome)
	g.catchUp()

	f.admitting(generous, 10*time.Second, 0)
	var gatewayDryRuns int
	f.dyn.PrependReactor("patch", "gateways", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !slices.Contains(a.(clienttesting.PatchActionImpl).PatchOptions.DryRun, metav1.DryRunAll) {
			return false, nil, nil
		}
		gatewayDryRuns++
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "gateway.networking.k8s.io", Resource: "gateways"}, "gw",
			errors.New("DynamicPrefix home does not let Gateways in namespace tenant follow it (spec.serviceNamespaces)"))
	})
	f.report(3, prefixB, prefixA)
	if got, _ := f.pass(); !slices.Equal(got, []string{"patch dynamicprefixes/status home"}) {
		t.Fatalf("the renumbering's first pass wrote %q, want the status", got)
	}
	g.catchUp()
	got, o := f.pass()
	if !slices.Equal(got, []string{"patch services web"}) || o.After != 0 || gatewayDryRuns != 0 {
		t.Errorf("the pass after the status was seen wrote %q, looks again after %s, after %d dry runs of the Gateway; want the Service, now, none",
			got, o.After, gatewayDryRuns)
	}
}
