package e2e

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/api"
	write "github.com/renumber/renumber/internal/writer/apply"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// The label and the annotation a policy engine's mutating webhook adds to
// whatever the writer updates (as a Kyverno mutate rule or Gatekeeper's
// AssignMetadata would).
const (
	webhookAnnotation = "policy.example.org/audited"
)

// TestAMutatingWebhookStopsTheWriterOnlyWhereItsKeysAreRead (issue 42):
// a real mutating webhook, served by the test over TLS on loopback, adds a
// label and an annotation to every object the writer's identity updates.
// Where nothing reads such keys for addresses - a CiliumLoadBalancerIPPool,
// a NetworkPolicy, a DynamicPrefix whose finalizer the writer removes - the
// writer's honest write is admitted with them (before, renumber-writer-pools
// and -dynamicprefixes refused it, for ever), and the stolen token's change
// of a key something reads is still refused. Where selectors read them - a
// Service's labels (LB-IPAM pools, BGP advertisements, MetalLB), a CIDR
// group's (CiliumNetworkPolicy's cidrGroupSelector) - the write stays
// refused, with a message the writer takes as "changed on the way" (said
// once: TestAWriteRefusedForWhatAWebhookAddedIsSaidOnce).
func TestAMutatingWebhookStopsTheWriterOnlyWhereItsKeysAreRead(t *testing.T) {
	s := stealWriterToken(t, nil)
	apply(t, s.w, poolGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}}})
	apply(t, s.w, networkPolicyGVR, map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "lan", "namespace": "default", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec": map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress"}, "ingress": []any{
			map[string]any{"from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/8"}}}}}}})
	apply(t, s.w, api.GVR, map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": "old", "finalizers": []any{"dynamic-prefix.io/finalizer"}},
		"spec":     map[string]any{"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}}}})
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationIPs: "192.0.2.7"})

	calls := labellingWebhook(t, s, []admissionregistrationv1.RuleWithOperations{
		rule("", "services"), rule("networking.k8s.io", "networkpolicies"),
		rule("cilium.io", "ciliumloadbalancerippools", "ciliumcidrgroups"), rule("dynamic-prefix.io", "dynamicprefixes")})

	// The writer's own writes, as it makes them: its entries and record.
	lbWrite := `{"metadata":{"annotations":{"dynamic-prefix.io/managed-blocks":"2001:db8:1::/64"}},` +
		`"spec":{"blocks":[{"cidr":"192.0.2.0/24"},{"cidr":"2001:db8:1::/64"}]}}`
	eventually(t, "the webhook called on the writer's update", func() (bool, string) {
		_ = s.patch(poolGVR, "", "lb", lbWrite)
		return calls.Load() > 0, "not called"
	})
	if err := s.patch(poolGVR, "", "lb", lbWrite); err != nil {
		t.Errorf("the writer's entries and record on an LB-IPAM pool, with a label and an annotation the webhook adds: %v", err)
	}
	if u := s.read(t, poolGVR, "", "lb"); u.GetLabels()[webhookLabel] != "net" || u.GetAnnotations()[webhookAnnotation] != "true" {
		t.Errorf("the LB-IPAM pool holds labels %v, annotations %v: the webhook's are missing (did it run?)", u.GetLabels(), u.GetAnnotations())
	}
	npWrite := `{"metadata":{"annotations":{"dynamic-prefix.io/managed-cidrs":"2001:db8:1::/64"}},"spec":{"ingress":[{"from":[` +
		`{"ipBlock":{"cidr":"10.0.0.0/8"}},{"ipBlock":{"cidr":"2001:db8:1::/64"}}]}]}}`
	if err := s.patch(networkPolicyGVR, "default", "lan", npWrite); err != nil {
		t.Errorf("the writer's ipBlock and record on a NetworkPolicy, with what the webhook adds: %v", err)
	}
	if err := s.patch(api.GVR, "", "old", `{"metadata":{"finalizers":null}}`); err != nil {
		t.Errorf("the existing operator's finalizer removed from a DynamicPrefix, with what the webhook adds: %v", err)
	}

	// What something reads stays frozen, the webhook's keys or not.
	for what, p := range map[string]struct {
		gvr             schema.GroupVersionResource
		ns, name, patch string
	}{
		"an LB-IPAM pool given another DynamicPrefix (label)":     {poolGVR, "", "lb", `{"metadata":{"labels":{"dynamic-prefix.io/name":"other"}}}`},
		"an LB-IPAM pool given another DynamicPrefix":             {poolGVR, "", "lb", `{"metadata":{"annotations":{"dynamic-prefix.io/name":"other"}}}`},
		"an LB-IPAM pool given a subnet":                          {poolGVR, "", "lb", `{"metadata":{"annotations":{"dynamic-prefix.io/subnet":"public"}}}`},
		"an LB-IPAM pool labelled managed-by renumber":            {poolGVR, "", "lb", `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"renumber"}}}`},
		"a NetworkPolicy following nothing":                       {networkPolicyGVR, "default", "lan", `{"metadata":{"annotations":{"dynamic-prefix.io/name":null}}}`},
		"a NetworkPolicy labelled advertise: bgp":                 {networkPolicyGVR, "default", "lan", `{"metadata":{"labels":{"advertise":"bgp"}}}`},
		"a CIDR group relabelled (a CiliumNetworkPolicy selects)": {groupGVR, "", "probe", `{"metadata":{"labels":{"role":"vpn"}}}`},
		"a Service relabelled (an LB-IPAM pool selects)":          {serviceGVR, "default", "web", `{"metadata":{"labels":{"expose":"public"}}}`},
		"a Service moved to another MetalLB pool":                 {serviceGVR, "default", "web", `{"metadata":{"annotations":{"metallb.io/address-pool":"public"}}}`},
		"a DynamicPrefix's dynamic-prefix.io/ label":              {api.GVR, "", "home", `{"metadata":{"labels":{"dynamic-prefix.io/name":"other"}}}`},
	} {
		if err := s.patch(p.gvr, p.ns, p.name, p.patch); !denied(err) {
			t.Errorf("%s: %s", what, errString(err))
		}
	}

	// Where the webhook's label is read, the writer's honest write is
	// refused as a change of metadata: the writer says so, once.
	for what, p := range map[string]struct {
		gvr             schema.GroupVersionResource
		ns, name, patch string
	}{
		"a Service's address and record": {serviceGVR, "default", "web",
			`{"metadata":{"annotations":{"lbipam.cilium.io/ips":"192.0.2.7,2001:db8:1::7","dynamic-prefix.io/managed-ips":"2001:db8:1::7"}}}`},
		"a CIDR group's entry and record": {groupGVR, "", "probe",
			`{"metadata":{"annotations":{"dynamic-prefix.io/managed-cidrs":"2001:db8:1::/64"}},"spec":{"externalCIDRs":["198.51.100.0/24","2001:db8:1::/64"]}}`},
	} {
		if err := s.patch(p.gvr, p.ns, p.name, p.patch); !denied(err) || !strings.Contains(err.Error(), write.MetadataRefusal) {
			t.Errorf("the writer's write of %s, with the webhook's label: %s, want refused, beginning %q", what, errString(err), write.MetadataRefusal)
		}
	}
}

func rule(group string, resources ...string) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources}}
}

// labellingWebhook serves, over TLS on loopback, a mutating webhook that adds
// webhookLabel and webhookAnnotation to every object the writer's identity
// updates under rules, and registers it; it counts its calls.
func labellingWebhook(t *testing.T, s stolen, rules []admissionregistrationv1.RuleWithOperations) *atomic.Int64 {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		var obj struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		_ = json.Unmarshal(review.Request.Object.Raw, &obj)
		var patch []map[string]any
		for field, kv := range map[string][2]string{"labels": {webhookLabel, "net"}, "annotations": {webhookAnnotation, "true"}} {
			has := obj.Metadata.Labels != nil
			if field == "annotations" {
				has = obj.Metadata.Annotations != nil
			}
			if has {
				patch = append(patch, map[string]any{"op": "add", "path": "/metadata/" + field + "/" + strings.ReplaceAll(kv[0], "/", "~1"), "value": kv[1]})
			} else {
				patch = append(patch, map[string]any{"op": "add", "path": "/metadata/" + field, "value": map[string]string{kv[0]: kv[1]}})
			}
		}
		body, _ := json.Marshal(patch)
		jsonPatch := admissionv1.PatchTypeJSONPatch
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true, Patch: body, PatchType: &jsonPatch}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := srv.URL + "/mutate"
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "labels.policy.example.org"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "labels.policy.example.org",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules:                   rules,
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "is-writer",
				Expression: "request.userInfo.username.startsWith('system:serviceaccount:') && request.userInfo.username.endsWith(':renumber-writer')"}},
		}},
	}
	if _, err := s.w.API.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(s.ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &calls
}
