package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// The Service Cilium's Gateway controller generates is its own: the writer
// never writes it, whatever renumber's keys a tenant's Gateway puts in its
// spec.infrastructure.annotations (which the controller copies onto it) -
// here the Gateway follows nothing while its infrastructure annotations
// ask the generated Service to follow home and carry a record. What the
// real controller writes is what the writer tells the Service by: its
// controller reference, the Gateway's UID. The Gateway gets one event.
func TestTheServiceCiliumsGatewayControllerGeneratesIsNeverWritten(t *testing.T) {
	w, _ := ciliumGatewayWorld(t)
	ctx := t.Context()
	if _, err := w.API.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}, "serviceNamespaces": []any{"team"}})
	createPool(t, w)
	startAgent(t, w, "node1")
	startWriter(t, w, "writer")
	eventually(t, "home follows A", func() (bool, string) {
		return dpStatus(t, w, "home").CurrentPrefix == prefixA.String(), ""
	})
	before := mark(t, w)
	infra := map[string]any{dynamicprefix.AnnotationName: "home", holdings.AnnotationSuffix: "::ffff:0:0:7", holdings.AnnotationManagedIPs: "2001:db8:eeee::1"}
	gw, err := w.API.Dynamic.Resource(gatewayGVR).Namespace("team").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"namespace": "team", "name": "loop"},
		"spec": map[string]any{"gatewayClassName": "cilium", "infrastructure": map[string]any{"annotations": infra},
			"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var generated *corev1.Service
	eventually(t, "Cilium's controller generates team/cilium-gateway-loop", func() (bool, string) {
		generated, err = w.API.Client.CoreV1().Services("team").Get(ctx, "cilium-gateway-loop", metav1.GetOptions{})
		return err == nil, ""
	})
	ref := metav1.GetControllerOf(generated)
	if ref == nil || ref.Kind != "Gateway" || ref.Name != "loop" || ref.UID != gw.GetUID() {
		t.Fatalf("the generated Service's controller reference is %+v, want the Gateway loop (UID %s)", ref, gw.GetUID())
	}
	t.Logf("Cilium's controller generated the Service with controller reference %s %s %s, annotations %v", ref.APIVersion, ref.Kind, ref.Name, generated.Annotations)
	waitEvent(t, w, "InfrastructureAnnotationsIgnored", "loop")
	settleWrites()
	ws, err := w.API.WritesSince(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	for _, wr := range ws {
		if wr.Resource == "services" && wr.Name == "cilium-gateway-loop" && wr.User == writerUser {
			t.Errorf("the writer wrote team/cilium-gateway-loop (%+v), want never: it is Cilium's controller's", wr)
		}
	}
}
