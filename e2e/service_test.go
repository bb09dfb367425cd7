package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/tools/world"
)

// createService creates a LoadBalancer Service in default with annotations ann.
func createService(t *testing.T, w *world.World, name string, ann map[string]string) {
	t.Helper()
	createServiceIn(t, w, "default", name, ann)
}

// createServiceIn is createService in namespace ns.
func createServiceIn(t *testing.T, w *world.World, ns, name string, ann map[string]string) {
	t.Helper()
	createServiceWith(t, w.API.Client, ns, name, ann)
}

// createServiceWith is createServiceIn as the identity of cs (a tenant's).
func createServiceWith(t *testing.T, cs kubernetes.Interface, ns, name string, ann map[string]string) {
	t.Helper()
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Service %s/%s: %v", ns, name, err)
	}
}

// serviceWrites returns the writer's Service writes since m, once writes settled.
func serviceWrites(t *testing.T, w *world.World, m world.Mark) []string {
	t.Helper()
	settleWrites()
	var out []string
	for _, wr := range objectWrites(writesBy(t, w, m, writerUser)) {
		if strings.HasPrefix(wr, "patch services ") {
			out = append(out, wr)
		}
	}
	return out
}

// TestHAServiceFollowsThePrefix: a Service in transition mode "ha" keeps the
// current and the draining address for Cilium (old connections keep working)
// while DNS moves to the new address at once (no load balancer publishes an
// ingress here: nothing to wait for); user entries stay.
func TestHAServiceFollowsThePrefix(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{
		"transition": map[string]any{"mode": "ha"},
	})
	svc := func(name string, ann map[string]string) { createService(t, w, name, ann) }
	svc("web", map[string]string{
		"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1",
		holdings.AnnotationIPs: "192.0.2.7", holdings.AnnotationTarget: "lb.example.org",
	})
	svc("internal", map[string]string{
		"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:2", holdings.AnnotationSkipDNS: "true",
	})
	svc("unrelated", map[string]string{holdings.AnnotationIPs: "192.0.2.9"})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	addr := func(p string, host string) string {
		a, err := model.Splice(netip.MustParsePrefix(p), netip.MustParseAddr(host))
		if err != nil {
			t.Fatal(err)
		}
		return a.String()
	}
	a1, b1 := addr(prefixA.String(), "::ffff:0:1"), addr(prefixB.String(), "::ffff:0:1")
	expect := func(name string, ips, targets []string) {
		t.Helper()
		eventually(t, name+" annotations", func() (bool, string) {
			s, err := w.API.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			gotIPs := holdings.Split(s.Annotations[holdings.AnnotationIPs])
			gotT := holdings.Split(s.Annotations[holdings.AnnotationTarget])
			_, hasT := s.Annotations[holdings.AnnotationTarget]
			okT := slices.Equal(gotT, targets) && (len(targets) > 0 || !hasT)
			return slices.Equal(gotIPs, ips) && okT, fmt.Sprintf("ips %q targets %q", gotIPs, gotT)
		})
	}
	expect("web", []string{"192.0.2.7", a1}, []string{"lb.example.org", a1})
	expect("internal", []string{addr(prefixA.String(), "::ffff:0:2")}, nil)
	settleWrites()

	m := mark(t, w)
	advertise(t, w, prefixB, prefixA)
	expect("web", []string{"192.0.2.7", b1, a1}, []string{"lb.example.org", b1})
	expect("internal", []string{addr(prefixB.String(), "::ffff:0:2"), addr(prefixA.String(), "::ffff:0:2")}, nil)
	settleWrites()
	ws, err := w.API.WritesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	got := objectWrites(world.Filter(ws, world.ByUser(writerUser)))
	want := []string{"patch dynamicprefixes/status home 200", "patch services internal 200", "patch services web 200"}
	if !slices.Equal(got, want) {
		t.Errorf("writer writes for the change:\n got %q\nwant %q", got, want)
	}
	if s, _ := w.API.Client.CoreV1().Services("default").Get(ctx, "unrelated", metav1.GetOptions{}); s.Annotations[holdings.AnnotationIPs] != "192.0.2.9" {
		t.Errorf("a Service without our annotation was touched: %v", s.Annotations)
	}
}

// publish writes ips into a Service's status.loadBalancer.ingress, as Cilium's
// LB-IPAM does once it has allocated them (LB-IPAM itself does not run in this
// world; issue 14 item 7).
func publish(t *testing.T, w *world.World, name string, ips ...string) {
	t.Helper()
	eventually(t, "publishing "+name+"'s ingress", func() (bool, string) {
		s, err := w.API.Client.CoreV1().Services("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s.Status.LoadBalancer.Ingress = nil
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		if _, err := w.API.Client.CoreV1().Services("default").UpdateStatus(t.Context(), s, metav1.UpdateOptions{}); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// TestDNSWaitsForTheLoadBalancer, with Cilium's own LB-IPAM allocating the
// addresses: after a renumbering the new address is asked for at once, but DNS
// stays on the old one (still allocated, still answering) until LB-IPAM has
// allocated the new one and published it in the Service's status; then the
// target moves, in the Service's second write of the change.
func TestDNSWaitsForTheLoadBalancer(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	if _, err := w.StartLBIPAM(); err != nil {
		t.Fatal(err)
	}
	runCilium(t, w, "quay.io/cilium/cilium:v1.20.1") // no L2 announcer nudge: TestL2AnnouncerNudge
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}},
	})
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{
			"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}},
			IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol}, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack)},
	}
	if _, err := w.API.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")
	on := func(p netip.Prefix) string {
		a, err := model.Splice(p, netip.MustParseAddr("::ffff:0:1"))
		if err != nil {
			t.Fatal(err)
		}
		return a.String()
	}
	a1, b1 := on(prefixA), on(prefixB)
	expect := func(what string, ips []string, target string) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			s, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			gotIPs := holdings.Split(s.Annotations[holdings.AnnotationIPs])
			published := holdings.Ingress(s) // in LB-IPAM's order
			ok := slices.Equal(gotIPs, ips) && slices.Equal(slices.Sorted(slices.Values(published)), slices.Sorted(slices.Values(ips)))
			for _, k := range holdings.DefaultTargetKeys {
				ok = ok && s.Annotations[k] == target
			}
			return ok, fmt.Sprintf("ips %q ingress %q annotations %v", gotIPs, published, s.Annotations)
		})
	}
	expect("the first address, allocated by LB-IPAM", []string{a1}, a1)
	m := mark(t, w)
	if got := serviceWrites(t, w, m); len(got) != 0 {
		t.Fatalf("LB-IPAM publishing what we asked for made the writer write %q", got)
	}

	advertise(t, w, prefixB, prefixA)
	expect("both addresses allocated, DNS on the new one", []string{b1, a1}, b1)
	if got, want := serviceWrites(t, w, m), []string{"patch services web 200", "patch services web 200"}; !slices.Equal(got, want) {
		t.Errorf("the whole change: %q, want %q (one write asks, one moves DNS)", got, want)
	}
	// The writer's journal: the first write asked for b1 and kept DNS on a1.
	if n := countLog(w, "writer-a.log", fmt.Sprintf("ips=\"[%s %s]\" dns=[%s]", b1, a1, a1)); n != 1 {
		t.Errorf("%d writes asked for %s with DNS held on %s, want 1", n, b1, a1)
	}
}
