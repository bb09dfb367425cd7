package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// Red team r9b F2 with the real parts (s30-gwpossess had only the
// fixture, TestRT9BAGatewayWhoseNextAddressATenantRacedKeepsItsDrainingAddressAtANewTerm):
// Cilium's own Gateway controller generates default/cilium-gateway-gw for
// the Gateway default/gw and echoes in the Gateway's status.addresses what
// the real LB-IPAM grants that Service. The tenant of team, whose Service
// old follows home with a suffix of its own, lists the Gateway's next
// address (gw on B) in its own lbipam.cilium.io/ips - a request LB-IPAM
// leaves waiting, as no pool holds B. The router renumbers: the pool gains
// B, and LB-IPAM grants the tenant's waiting request before the Gateway's
// generated Service asks (logged; skipped if LB-IPAM grants it to the
// Gateway first: the premise did not happen). Within the term the writer's
// memory gives gw on B to the Gateway. Then the writer is killed and a new
// one leads, A still draining: it reads gw on B as published for team/old,
// and gw on A as published for the Gateway (LB-IPAM publishes it for the
// Service the controller generated, and the Gateway's status echoes it).
// Wanted: the Gateway is held as a held Service is - it keeps gw on A in
// spec.addresses and the infrastructure annotation, LB-IPAM keeps
// publishing it, and its status keeps echoing it - and home reports the
// address published for another. Before s30-gwpossess the new term read
// nothing published for a Gateway and released it whole, gw on A too.
func TestAGatewayWhoseNextAddressATenantRacedKeepsItsDrainingAddressAtANewTerm(t *testing.T) {
	w, _ := ciliumGatewayWorld(t)
	ctx := t.Context()
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}, "serviceNamespaces": []any{"default", "team"}})
	createPool(t, w)
	team := newTenant(t, w, "team")
	createServiceWith(t, team.cs, team.ns, "old", map[string]string{"dynamic-prefix.io/name": "home",
		holdings.AnnotationSuffix: "::ffff:0:9", holdings.AnnotationSkipDNS: "true"})
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"namespace": "default", "name": "gw", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:2"}},
		"spec": map[string]any{"gatewayClassName": "cilium",
			"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}},
			"addresses": []any{map[string]any{"type": "IPAddress", "value": "192.0.2.10"}}},
	}}
	if _, err := w.API.Dynamic.Resource(gatewayGVR).Namespace("default").Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startAgent(t, w, "node1")
	writer := startWriter(t, w, "writer-a")

	gwA, gwB := on(t, prefixA, "::ffff:0:2"), on(t, prefixB, "::ffff:0:2")
	oldA := on(t, prefixA, "::ffff:0:9")
	eventually(t, "the Gateway written "+gwA+", published for its generated Service and echoed", func() (bool, string) {
		asked, published, echoed := gatewayAtTheLoadBalancer(t, w, "default", "gw")
		return slices.Contains(asked, gwA) && slices.Contains(published, gwA) && slices.Contains(echoed, gwA), fmt.Sprint(asked, published, echoed)
	})
	eventually(t, "team/old written and published "+oldA, func() (bool, string) {
		ann, published := annotationsAndIngress(t, w, team.ns, "old")
		return slices.Contains(holdings.Split(ann[holdings.AnnotationIPs]), oldA) && slices.Contains(published, oldA), fmt.Sprint(ann, published)
	})
	// The tenant's own entry, waiting for the Gateway's next address.
	ann, _ := annotationsAndIngress(t, w, team.ns, "old")
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, holdings.AnnotationIPs, ann[holdings.AnnotationIPs]+","+gwB)
	if _, err := team.cs.CoreV1().Services(team.ns).Patch(ctx, "old", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	settleWrites()

	advertise(t, w, prefixB, prefixA) // A drains for 10 minutes
	winner := ""
	eventually(t, "LB-IPAM grants "+gwB, func() (bool, string) {
		_, tenant := annotationsAndIngress(t, w, team.ns, "old")
		_, generated, _ := gatewayAtTheLoadBalancer(t, w, "default", "gw")
		switch {
		case slices.Contains(tenant, gwB):
			winner = "team/old"
		case slices.Contains(generated, gwB):
			winner = "default/cilium-gateway-gw"
		}
		return winner != "", fmt.Sprint(tenant, generated)
	})
	t.Logf("LB-IPAM granted %s to %s first", gwB, winner)
	if winner != "team/old" {
		t.Skipf("LB-IPAM granted %s to the Gateway's generated Service, not to the tenant's waiting request: the red team's premise did not happen here", gwB)
	}
	eventually(t, "within the term the Gateway is written "+gwB+" and "+gwA, func() (bool, string) {
		asked, published, echoed := gatewayAtTheLoadBalancer(t, w, "default", "gw")
		return slices.Contains(asked, gwB) && slices.Contains(asked, gwA), fmt.Sprint(asked, published, echoed)
	})

	_ = writer.Process.Kill() // SIGKILL: the next leader starts with no memory
	m := mark(t, w)
	startWriter(t, w, "writer-b")
	conflict := func() string {
		st := dpStatus(t, w, "home")
		c := condition(st, render.ServiceAddressConflict)
		for _, x := range st.Conditions {
			if x.Type == render.ServiceAddressConflict {
				c += ": " + x.Message
			}
		}
		return c
	}
	eventually(t, "the new leader weighed the claims (home reports a conflict over "+gwB+")", func() (bool, string) {
		c := conflict()
		return strings.HasPrefix(c, "True ") && strings.Contains(c, gwB), c
	})
	settleWrites()
	settleWrites()
	if c := conflict(); !strings.HasPrefix(c, "True "+render.ReasonPublishedElsewhere) || !strings.Contains(c, "team/old") {
		t.Errorf("home's %s is %q, want %s naming team/old, where LB-IPAM publishes %s", render.ServiceAddressConflict, c, render.ReasonPublishedElsewhere, gwB)
	}
	asked, published, echoed := gatewayAtTheLoadBalancer(t, w, "default", "gw")
	holds := gatewayHolds(t, w, "default", "gw")
	t.Logf("after the new term: the Gateway holds %v; its generated Service asks for %v, is given %v; its status echoes %v", holds, asked, published, echoed)
	if !strings.Contains(fmt.Sprint(holds["addresses"]), "IPAddress "+gwA) || !slices.Contains(asked, gwA) {
		t.Errorf("the Gateway's spec.addresses %q, its generated Service asks for %v: its draining address %s, which LB-IPAM publishes for it, was taken out at the new term",
			holds["addresses"], asked, gwA)
	}
	if !slices.Contains(published, gwA) || !slices.Contains(echoed, gwA) {
		t.Errorf("LB-IPAM publishes %v for the Gateway's generated Service, its status echoes %v: want %s in both", published, echoed, gwA)
	}
	if _, tenant := annotationsAndIngress(t, w, team.ns, "old"); slices.Contains(tenant, gwA) {
		t.Errorf("LB-IPAM publishes the Gateway's %s for team/old: %v", gwA, tenant)
	}
	for _, wr := range writesBy(t, w, m, writerUser) {
		if wr.Resource == "services" && wr.Name == "cilium-gateway-gw" {
			t.Errorf("the writer wrote the Service Cilium generates: %s", wr)
		}
	}
}

// gatewayAtTheLoadBalancer is, for the Gateway ns/name, what the Service
// Cilium's controller generated for it asks LB-IPAM for (its
// lbipam.cilium.io/ips), what LB-IPAM publishes for it, and what the
// Gateway's status.addresses echo.
func gatewayAtTheLoadBalancer(t *testing.T, w *world.World, ns, name string) (asked, published, echoed []string) {
	t.Helper()
	if s, err := w.API.Client.CoreV1().Services(ns).Get(t.Context(), "cilium-gateway-"+name, metav1.GetOptions{}); err == nil {
		asked, published = holdings.Split(s.Annotations[holdings.AnnotationIPs]), holdings.Ingress(s)
	}
	u, err := w.API.Dynamic.Resource(gatewayGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
	for _, a := range list {
		echoed = append(echoed, fmt.Sprint(a.(map[string]any)["value"]))
	}
	return asked, published, echoed
}
