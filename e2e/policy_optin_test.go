package e2e

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// TestAnEmptyFollowAnnotationOptsNothingIn (sixth red team, r6b): the
// writer reads `dynamic-prefix.io/name: ""` as following nothing
// (backends.follower: dp != ""), and so does renumber-writer-pools
// (an empty value is no DynamicPrefix) - but renumber-writer-services and
// renumber-writer-gateways read "opted in" as the key being present
// (`'dynamic-prefix.io/name' in variables.after`), and renumber-writer-values
// is constrained only by a DynamicPrefix whose name equals the annotation,
// which "" never is. So on a Service or Gateway whose user left the key
// empty (a chart's `{{ .Values.dynamicPrefix | quote }}` unset) a stolen
// writer token adds any address and DNS target and strips the user's own,
// where on one without the key both are refused.
func TestAnEmptyFollowAnnotationOptsNothingIn(t *testing.T) {
	s := stealWriterToken(t, nil)
	createService(t, s.w, "empty", map[string]string{"dynamic-prefix.io/name": "",
		holdings.AnnotationIPs: "192.0.2.9", holdings.AnnotationTarget: "a.example.org"})
	for what, ann := range map[string]map[string]any{
		"an address outside every status (2001:db8:bad::1)": {holdings.AnnotationIPs: "192.0.2.9,2001:db8:bad::1"},
		"another Service's address (192.0.2.10)":            {holdings.AnnotationIPs: "192.0.2.9,192.0.2.10"},
		"a DNS target outside every status":                 {holdings.AnnotationTarget: "a.example.org,2001:db8:bad::1"},
		"the user's address taken out":                      {holdings.AnnotationIPs: nil},
		"the user's DNS target taken out":                   {holdings.AnnotationTarget: nil},
	} {
		if err := s.annotate("default", "empty", ann); !denied(err) {
			t.Errorf("%s on a Service whose dynamic-prefix.io/name is empty (it follows nothing): %s", what, errString(err))
		}
		// Put back what an admitted write changed, so each case is tried alone.
		_ = s.annotate("default", "empty", map[string]any{holdings.AnnotationIPs: "192.0.2.9", holdings.AnnotationTarget: "a.example.org"})
	}

	if err := s.w.API.InstallGatewayAPI(s.ctx); err != nil {
		t.Fatal(err)
	}
	gw := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: empty
  namespace: default
  annotations:
    dynamic-prefix.io/name: ""
spec:
  gatewayClassName: cilium
  listeners: [{name: http, port: 80, protocol: HTTP}]
  addresses:
    - {type: IPAddress, value: 192.0.2.9}
`), &gw.Object); err != nil {
		t.Fatal(err)
	}
	apply(t, s.w, gatewayGVR, gw.Object)
	for what, body := range map[string]string{
		"an address outside every status": `{"spec":{"addresses":[{"type":"IPAddress","value":"192.0.2.9"},{"type":"IPAddress","value":"2001:db8:bad::1"}]}}`,
		"the user's address taken out":    `{"spec":{"addresses":[{"type":"IPAddress","value":"2001:db8:1::1"}]}}`,
	} {
		if err := s.patch(gatewayGVR, "default", "empty", body); !denied(err) {
			t.Errorf("%s on a Gateway whose dynamic-prefix.io/name is empty (it follows nothing): %s", what, errString(err))
		}
		_ = s.patch(gatewayGVR, "default", "empty", `{"spec":{"addresses":[{"type":"IPAddress","value":"192.0.2.9"}]}}`)
	}
}
