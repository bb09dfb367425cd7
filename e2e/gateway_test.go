package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/tools/world"
)

var gatewayGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}

// gatewayHolds is what a Gateway holds in the places the writer writes:
// spec.addresses as "type value", the infrastructure annotation, the DNS
// targets and the record, and how many listeners it has.
func gatewayHolds(t *testing.T, w *world.World, ns, name string) map[string]any {
	t.Helper()
	u, err := w.API.Dynamic.Resource(gatewayGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var addresses []string
	list, _, _ := unstructured.NestedSlice(u.Object, "spec", "addresses")
	for _, a := range list {
		m := a.(map[string]any)
		addresses = append(addresses, fmt.Sprint(m["type"], " ", m["value"]))
	}
	infra, _, _ := unstructured.NestedStringMap(u.Object, "spec", "infrastructure", "annotations")
	listeners, _, _ := unstructured.NestedSlice(u.Object, "spec", "listeners")
	ann := u.GetAnnotations()
	return map[string]any{"addresses": strings.Join(addresses, ", "), "infrastructure": infra, "listeners": len(listeners),
		"target": ann[holdings.AnnotationTarget], "alpha": ann[holdings.AnnotationTargetAlpha], "record": ann[holdings.AnnotationManagedIPs]}
}

// gatewayWorld is one node on prefixA with the Gateway API's standard
// channel CRDs and home, an HA DynamicPrefix.
func gatewayWorld(t *testing.T) *world.World {
	t.Helper()
	w := newWorld(t, 1)
	if err := w.API.InstallGatewayAPI(t.Context()); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	return w
}

// TestGatewaysFollow: a Gateway (the Gateway API's real standard-channel
// CRDs) that names a DynamicPrefix gets its suffix on the current prefix in
// spec.addresses, the LB-IPAM infrastructure annotation and the DNS targets,
// beside the user's IPv4 address, hostname, infrastructure annotation and
// target, which stay; a renumbering puts the new address first, the old one
// draining, in one patch of the Gateway, counted in
// renumber_writer_object_writes_total; at rest nothing is written; an
// address taken out of one place is put back in one patch. The writer runs
// under the shipped RBAC and admission policies.
func TestGatewaysFollow(t *testing.T) {
	w := gatewayWorld(t)
	ctx := t.Context()
	gw := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: web
  namespace: default
  annotations:
    dynamic-prefix.io/name: home
    dynamic-prefix.io/suffix: "::ffff:0:0:3"
    external-dns.kubernetes.io/target: 192.0.2.9
spec:
  gatewayClassName: cilium
  listeners: [{name: http, port: 80, protocol: HTTP}]
  addresses:
    - {type: IPAddress, value: 192.0.2.9}
    - {type: Hostname, value: web.example.org}
  infrastructure:
    annotations: {example.org/team: web}
`), &gw.Object); err != nil {
		t.Fatal(err)
	}
	gateways := w.API.Dynamic.Resource(gatewayGVR).Namespace("default")
	if _, err := gateways.Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	metrics := freeAddr(t)
	startAgent(t, w, "node1")
	writer := startWriter(t, w, "writer-a", "--metrics-addr", metrics)

	a, b := on(t, prefixA, "::ffff:0:0:3"), on(t, prefixB, "::ffff:0:0:3")
	holding := func(what string, want map[string]any) {
		t.Helper()
		eventually(t, "the Gateway holds "+what, func() (bool, string) {
			diff := cmp.Diff(want, gatewayHolds(t, w, "default", "web"))
			return diff == "", "(-want +got)\n" + diff
		})
	}
	atA := map[string]any{"addresses": "IPAddress 192.0.2.9, Hostname web.example.org, IPAddress " + a,
		"infrastructure": map[string]string{"example.org/team": "web", holdings.AnnotationIPs: "192.0.2.9," + a},
		"listeners":      1, "target": "192.0.2.9," + a, "alpha": a, "record": a}
	holding("A", atA)

	gatewayPatches := func(m world.Mark) []string {
		var out []string
		for _, wr := range writesBy(t, w, m, writerUser) {
			if wr.Resource == "gateways" {
				out = append(out, wr.String())
			}
		}
		return out
	}
	settleWrites()
	m := mark(t, w)
	counted := writerMetric(metrics, `renumber_writer_object_writes_total{resource="gateways"}`)
	advertise(t, w, prefixB, prefixA)
	atB := map[string]any{"addresses": "IPAddress 192.0.2.9, Hostname web.example.org, IPAddress " + b + ", IPAddress " + a,
		"infrastructure": map[string]string{"example.org/team": "web", holdings.AnnotationIPs: "192.0.2.9," + b + "," + a},
		"listeners":      1, "target": "192.0.2.9," + b, "alpha": b, "record": b + "," + a}
	holding("B, A draining", atB)
	settleWrites()
	if got := gatewayPatches(m); len(got) != 1 {
		t.Errorf("Gateway writes for one renumbering: %q, want one patch", got)
	}
	if now := writerMetric(metrics, `renumber_writer_object_writes_total{resource="gateways"}`); now != counted+1 {
		t.Errorf("renumber_writer_object_writes_total{resource=\"gateways\"} went from %v to %v, want one more", counted, now)
	}

	m = mark(t, w)
	settleWrites()
	settleWrites()
	if got := gatewayPatches(m); len(got) != 0 {
		t.Errorf("at rest the writer wrote the Gateway: %q", got)
	}

	// The user's edit drops our addresses from the infrastructure
	// annotation: one patch puts them back, the edit's other change stays.
	u, err := gateways.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"example.org/team": "web", holdings.AnnotationIPs: "192.0.2.9"},
		"spec", "infrastructure", "annotations")
	m = mark(t, w)
	if _, err := gateways.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	holding("B, A draining again", atB)
	settleWrites()
	if got := gatewayPatches(m); len(got) != 1 {
		t.Errorf("Gateway writes to undo one edit: %q, want one patch", got)
	}
	if !alive(writer.Process.Pid) {
		t.Error("the writer exited")
	}
}

// TestCiliumsGatewayControllerFollows: manifests/examples/gateway.yaml with
// Cilium's own Gateway API controller and LB-IPAM (both built from the
// cilium module go.mod pins). The Service the controller generates for the
// Gateway asks LB-IPAM for the addresses renumber wrote on the Gateway, and
// LB-IPAM assigns them: the current prefix's, then after a renumbering the
// new one beside the draining one, the user's IPv4 address throughout; the
// controller reports them in the Gateway's status and keeps it Programmed.
// The writer never writes that Service (audit log).
func TestCiliumsGatewayControllerFollows(t *testing.T) {
	w, repo := ciliumGatewayWorld(t)
	ctx := t.Context()
	if err := w.API.Apply(ctx, filepath.Join(repo, "manifests", "examples", "gateway.yaml")); err != nil {
		t.Fatal(err)
	}
	m := mark(t, w)
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	// What the generated Service asks LB-IPAM for and was given, and what
	// the Gateway's status says, each as a sorted list.
	generated := func(want []string) {
		t.Helper()
		slices.Sort(want)
		eventually(t, "the generated Service and the Gateway's status hold "+strings.Join(want, ", "), func() (bool, string) {
			s, err := w.API.Client.CoreV1().Services("default").Get(ctx, "cilium-gateway-web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			asked := strings.Split(s.Annotations[holdings.AnnotationIPs], ",")
			var given []string
			for _, in := range s.Status.LoadBalancer.Ingress {
				given = append(given, in.IP)
			}
			u, err := w.API.Dynamic.Resource(gatewayGVR).Namespace("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var status []string
			list, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
			for _, a := range list {
				status = append(status, fmt.Sprint(a.(map[string]any)["value"]))
			}
			programmed := false
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				c := c.(map[string]any)
				programmed = programmed || c["type"] == "Programmed" && c["status"] == "True"
			}
			for _, l := range [][]string{asked, given, status} {
				slices.Sort(l)
			}
			ok := slices.Equal(asked, want) && slices.Equal(given, want) && slices.Equal(status, want) && programmed
			return ok, fmt.Sprintf("Service asks %q, is given %q; Gateway status %q, programmed %v", asked, given, status, programmed)
		})
	}
	a, b := on(t, prefixA, "::ffff:0:0:3"), on(t, prefixB, "::ffff:0:0:3")
	generated([]string{"192.0.2.10", a})
	advertise(t, w, prefixB, prefixA)
	generated([]string{"192.0.2.10", b, a})
	settleWrites()
	for _, wr := range writesBy(t, w, m, writerUser) {
		if wr.Resource == "services" && wr.Name == "cilium-gateway-web" {
			t.Errorf("the writer wrote the Service Cilium generates: %s", wr)
		}
	}
}

// ciliumGatewayWorld is a world of one node with the Gateway API CRDs,
// Cilium's LB-IPAM and Gateway API controller (startCiliumGateway) and the
// router advertising prefix A; and the repository's root (its examples).
func ciliumGatewayWorld(t *testing.T) (*world.World, string) {
	t.Helper()
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	skipWithoutCiliumGateway(t)
	w := newWorld(t, 1)
	if err := w.API.InstallGatewayAPI(t.Context()); err != nil {
		t.Fatal(err)
	}
	startCiliumGateway(t, w)
	advertise(t, w, prefixA)
	return w, repo
}

// skipWithoutCiliumGateway skips t when Cilium's Gateway API controller is
// not built here.
func skipWithoutCiliumGateway(t *testing.T) {
	t.Helper()
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, "_out", "bin", "ciliumgw")); err != nil {
		t.Skip("Cilium's Gateway API controller not built (make ciliumgw)")
	}
}

// startCiliumGateway starts in w (the Gateway API CRDs installed) Cilium's
// LB-IPAM and its Gateway API controller, and the GatewayClass cilium that
// controller owns; it skips t when the controller is not built here.
func startCiliumGateway(t *testing.T, w *world.World) {
	t.Helper()
	skipWithoutCiliumGateway(t)
	if _, err := w.StartLBIPAM(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.StartCiliumGateway(t.Context()); err != nil {
		t.Fatal(err)
	}
	apply(t, w, schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}, map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": map[string]any{"name": "cilium"},
		"spec": map[string]any{"controllerName": "io.cilium/gateway-controller"}})
}
