package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Red team r10b F3 (F2's hole, with Cilium's Gateway controller as the
// other side of the fight): a Service's release takes no write permit.
// A tenant creates, in its own namespace, a Gateway of class cilium that
// follows nothing, whose spec.infrastructure.annotations carry a
// renumber record (dynamic-prefix.io/managed-ips naming an address of
// the tenant's choosing). Cilium's controller copies the infrastructure
// annotations onto the Service it generates, cilium-gateway-<name>; the
// writer sees a Service that follows nothing but carries a record, and
// releases it (takes the record off); Cilium's controller, which owns the
// Service, puts its desired annotations back (a merge: its keys win); the
// writer releases it again. Nobody writes anything after the Gateway's
// creation, yet the writer writes the Service as fast as the two
// controllers can go. Wanted: the writer's writes to that Service stay
// within what its write-storm breaker allows a fight over one object (5 at
// once, 2 a minute), as it does for a pool (TestWriteStormBreaker).
func TestRT10BAGatewaysInfrastructureRecordStartsNoWriteStorm(t *testing.T) {
	w, _ := ciliumGatewayWorld(t)
	ctx := t.Context()
	if _, err := w.API.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}, "serviceNamespaces": []any{"default", "team"}})
	createPool(t, w)
	startAgent(t, w, "node1")
	startWriter(t, w, "writer")
	eventually(t, "home follows A", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == prefixA.String(), st.CurrentPrefix
	})

	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"namespace": "team", "name": "loop"},
		"spec": map[string]any{"gatewayClassName": "cilium",
			"listeners":      []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}},
			"infrastructure": map[string]any{"annotations": map[string]any{holdings.AnnotationManagedIPs: "2001:db8:eeee::1"}}},
	}}
	if _, err := w.API.Dynamic.Resource(gatewayGVR).Namespace("team").Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Cilium's controller generates team/cilium-gateway-loop", func() (bool, string) {
		_, err := w.API.Client.CoreV1().Services("team").Get(ctx, "cilium-gateway-loop", metav1.GetOptions{})
		return err == nil, ""
	})
	settleWrites()
	m := mark(t, w)
	const window = 30 * time.Second
	time.Sleep(window)
	writes, cilium := 0, 0
	ws, err := w.API.WritesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, wr := range ws {
		if wr.Resource != "services" || wr.Name != "cilium-gateway-loop" || wr.Code >= 300 {
			continue
		}
		if wr.User == writerUser {
			writes++
		} else {
			cilium++
		}
	}
	t.Logf("in %s after the Gateway's creation settled: the writer wrote team/cilium-gateway-loop %d times, others (Cilium's controller) %d", window, writes, cilium)
	if bound := 5 + 1; writes > bound {
		t.Errorf("the writer wrote team/cilium-gateway-loop %d times in %s, nobody but Cilium's controller writing it, want at most %d (the breaker's burst 5 and 2 a minute): a Service's release takes no write permit", writes, window, bound)
	}
}
