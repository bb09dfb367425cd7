package e2e

// r9a: a Gateway's record under the stolen writer token.

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/tools/world"
)

// TestRT9ATokenRecordsNoUsersAddressOnAGateway: the records rules of
// s29-records hold a Service's managed-ips (it grows only by an entry the
// same write adds) but not a Gateway's: renumber-writer-gateways lets the
// writer change dynamic-prefix.io/managed-ips on a Gateway that follows a
// DynamicPrefix freely, and renumber-writer-values checks only the
// addresses and targets. TestGatewaysFollow's Gateway web holds the user's
// 192.0.2.9 in spec.addresses, its infrastructure annotation and its DNS
// target, beside the writer's address on prefixA. The stolen token adds
// 192.0.2.9 to the record, one patch. The honest writer then owns it (the
// record names it, the prefix does not ask for it) and takes it out of all
// three places: web's IPv4 address is gone - off the Service its
// controller generates, and out of DNS - for good.
func TestRT9ATokenRecordsNoUsersAddressOnAGateway(t *testing.T) {
	w := gatewayWorld(t)
	ctx := t.Context()
	apply(t, w, gatewayGVR, map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "web", "namespace": "default", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", "dynamic-prefix.io/suffix": "::ffff:0:0:3", holdings.AnnotationTarget: "192.0.2.9"}},
		"spec": map[string]any{"gatewayClassName": "cilium",
			"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}},
			"addresses": []any{map[string]any{"type": "IPAddress", "value": "192.0.2.9"}}}})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")
	a := on(t, prefixA, "::ffff:0:0:3")
	eventually(t, "web holds the user's 192.0.2.9 and the writer's "+a, func() (bool, string) {
		got := gatewayHolds(t, w, "default", "web")
		return got["addresses"] == "IPAddress 192.0.2.9, IPAddress "+a && got["record"] == a, fmt.Sprint(got)
	})
	id, err := w.API.ServiceAccountIn(ctx, world.Namespace, "renumber-writer", "")
	if err != nil {
		t.Fatal(err)
	}
	forged := "192.0.2.9," + a
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, holdings.AnnotationManagedIPs, forged)
	if _, err := dynamic.NewForConfigOrDie(id.Config).Resource(gatewayGVR).Namespace("default").Patch(ctx, "web",
		types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Logf("the token's record naming the user's 192.0.2.9 refused (held): %v", err)
	} else {
		t.Logf("the token's record %q admitted", forged)
	}
	eventually(t, "the writer's pass after the token's write", func() (bool, string) {
		got := gatewayHolds(t, w, "default", "web")
		return got["record"] != forged, fmt.Sprint(got)
	})
	if got := gatewayHolds(t, w, "default", "web"); !strings.Contains(fmt.Sprint(got["addresses"]), "IPAddress 192.0.2.9") ||
		!strings.Contains(fmt.Sprint(got["target"]), "192.0.2.9") {
		t.Errorf("the user's 192.0.2.9 taken off Gateway web by the honest writer, after the stolen token named it in %s: %v",
			holdings.AnnotationManagedIPs, got)
	}
}
