package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// The Service a Gateway's controller generates for it (Cilium's:
// cilium-gateway-<name> beside the Gateway, its controller reference the
// Gateway's, as the e2e world's controller writes it) carries what the
// Gateway's spec.infrastructure.annotations say, and that controller merges
// them back on every change: the writer never writes it - neither follows
// nor releases it; the Gateway is what follows. Where it carries renumber's
// keys anyway, the Gateway gets one event. A Service only named so - no
// such Gateway, or one whose UID its reference does not name - is a
// Service like any other: released, under the budget and the policies.
func TestAServiceAGatewaysControllerGeneratedIsNeverWritten(t *testing.T) {
	const uid = types.UID("0a7e0000-0000-0000-0000-00000000100b")
	record := map[string]string{holdings.AnnotationManagedIPs: "2001:db8:eeee::1", holdings.AnnotationIPs: "2001:db8:eeee::1"}
	following := map[string]string{dynamicprefix.AnnotationName: "home", holdings.AnnotationSuffix: "::ffff:0:0:7"}
	for _, tc := range []struct {
		name        string
		ann         map[string]string
		owner       types.UID // "": no controller reference
		key         Key
		writes      int
		gatewayTold int
	}{
		{"generated, carrying a record", record, uid, Key{Action: ReleaseService, Namespace: "default", Name: "cilium-gateway-loop"}, 0, 1},
		{"generated, following home", following, uid, passHome, 0, 1},
		{"named so, referring to another Gateway", record, "another", Key{Action: ReleaseService, Namespace: "default", Name: "cilium-gateway-loop"}, 1, 0},
		{"named so, with no controller", record, "", Key{Action: ReleaseService, Namespace: "default", Name: "cilium-gateway-loop"}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := converged(t, shippedLimits(t))
			g := addGateway(t, f, "default", "loop", "::ffff:0:0:9", "")
			gw, err := f.dyn.Resource(gatewayGVR).Namespace("default").Get(t.Context(), "loop", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gw.SetAnnotations(nil) // it follows nothing
			gw.SetUID(uid)
			if _, err := f.dyn.Resource(gatewayGVR).Namespace("default").Update(t.Context(), gw, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			s := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cilium-gateway-loop", ResourceVersion: "1", Annotations: tc.ann}}
			if tc.owner != "" {
				s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "gateway.networking.k8s.io/v1beta1", Kind: "Gateway",
					Name: "loop", UID: tc.owner, Controller: ptr.To(true)}}
			}
			if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").(interface {
				CreateFake(*metav1.PartialObjectMetadata, metav1.CreateOptions, ...string) (*metav1.PartialObjectMetadata, error)
			}).CreateFake(s, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			g.catchUp()
			f.events.reasons = nil
			writes := 0
			for range 3 {
				writes += equal(f.settle(tc.key), "patch services cilium-gateway-loop")
				g.catchUp()
			}
			if writes != tc.writes {
				t.Errorf("three passes wrote default/cilium-gateway-loop %d times, want %d", writes, tc.writes)
			}
			if n := equal(f.events.reasons, "InfrastructureAnnotationsIgnored loop"); n != tc.gatewayTold {
				t.Errorf("the Gateway got %d InfrastructureAnnotationsIgnored events in three passes (%q), want %d", n, f.events.reasons, tc.gatewayTold)
			}
		})
	}
}
