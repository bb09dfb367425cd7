package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/prefix"
	"github.com/renumber/renumber/internal/writer/service"
	"github.com/renumber/renumber/tools/world"
)

// createService creates a LoadBalancer Service in default with annotations ann.
func createService(t *testing.T, w *world.World, name string, ann map[string]string) {
	t.Helper()
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: ann},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	if _, err := w.API.Client.CoreV1().Services("default").Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestHAServiceFollowsThePrefix: a Service in transition mode "ha" keeps the
// current and the draining address for Cilium (old connections keep working)
// while DNS moves to the new address at once; user entries stay.
func TestHAServiceFollowsThePrefix(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{
		"transition": map[string]any{"mode": "ha"},
	})
	svc := func(name string, ann map[string]string) { createService(t, w, name, ann) }
	svc("web", map[string]string{
		"dynamic-prefix.io/name": "home", service.AnnotationSuffix: "::ffff:0:1",
		service.AnnotationIPs: "192.0.2.7", service.AnnotationTarget: "lb.example.org",
	})
	svc("internal", map[string]string{
		"dynamic-prefix.io/name": "home", service.AnnotationSuffix: "::ffff:0:2", service.AnnotationSkipDNS: "true",
	})
	svc("unrelated", map[string]string{service.AnnotationIPs: "192.0.2.9"})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	addr := func(p string, host string) string {
		a, err := prefix.Splice(netip.MustParsePrefix(p), netip.MustParseAddr(host))
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
			gotIPs := service.Split(s.Annotations[service.AnnotationIPs])
			gotT := service.Split(s.Annotations[service.AnnotationTarget])
			_, hasT := s.Annotations[service.AnnotationTarget]
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
	if s, _ := w.API.Client.CoreV1().Services("default").Get(ctx, "unrelated", metav1.GetOptions{}); s.Annotations[service.AnnotationIPs] != "192.0.2.9" {
		t.Errorf("a Service without our annotation was touched: %v", s.Annotations)
	}
}
