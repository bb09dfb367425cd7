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
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
	write "github.com/renumber/renumber/internal/writer/apply"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/tools/world"
)

// The annotation a policy engine's mutating webhook adds to whatever the
// writer updates (as a Kyverno mutate rule or Gatekeeper's AssignMetadata
// would), beside webhookLabel; the admin lists it by its prefix.
const (
	webhookAnnotation = "audit.example.org/seen"
	webhookPrefix     = "audit.example.org/"
)

// The keys a GitOps tool tracks objects by: added by a stolen writer token,
// Argo CD or Flux may prune the object (a NetworkPolicy deleted opens
// traffic) or stop reconciling it.
var gitOpsKeys = map[string]string{
	"Argo CD's tracking label":      `{"metadata":{"labels":{"app.kubernetes.io/instance":"other"}}}`,
	"Argo CD's tracking annotation": `{"metadata":{"annotations":{"argocd.argoproj.io/tracking-id":"other:networking.k8s.io/NetworkPolicy:default/lan"}}}`,
	"Flux's kustomization label":    `{"metadata":{"labels":{"kustomize.toolkit.fluxcd.io/name":"other"}}}`,
}

// TestAMutatingWebhookStopsTheWriterOnlyWhereItsKeysAreRead (issue 42):
// a real mutating webhook, served by the test over TLS on loopback, adds a
// label and an annotation to every object the writer's identity updates.
// The keys that may change on the writer's writes are a closed list the
// admin names (webhookKeys, empty by default): with it empty, the webhook's
// keys are refused on every kind, and so is a GitOps tool's tracking key
// that a stolen token adds to a NetworkPolicy. With the webhook's keys
// listed - as the kustomize user patches the policies - the writer's honest
// write is admitted with them where nothing reads such keys for addresses
// (a CiliumLoadBalancerIPPool, a NetworkPolicy, a DynamicPrefix whose
// finalizer the writer removes), a key not listed stays refused, and so
// does a key something reads, listed or not. Where selectors read them -
// a Service's labels (LB-IPAM pools, BGP advertisements, MetalLB), a CIDR
// group's (CiliumNetworkPolicy's cidrGroupSelector) - the write stays
// refused, with a message the writer takes as "changed on the way" (said
// once: TestAWriteRefusedForWhatAWebhookAddedIsSaidOnce).
func TestAMutatingWebhookStopsTheWriterOnlyWhereItsKeysAreRead(t *testing.T) {
	s := stealWriterToken(t, nil)
	followingPoolAndPolicy(t, s)
	apply(t, s.w, api.GVR, map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": "old", "finalizers": []any{"dynamic-prefix.io/finalizer"}},
		"spec":     map[string]any{"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}}}})
	// Deleted (the writer removes the finalizer only from a DynamicPrefix
	// being deleted): the finalizer holds it.
	if err := s.w.API.Dynamic.Resource(api.GVR).Delete(s.ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationIPs: "192.0.2.7"})

	// The list empty (the default): a GitOps tool's key, or any other, is
	// refused on the kinds the writer updates.
	for what, p := range gitOpsKeys {
		if err := s.patch(networkPolicyGVR, "default", "lan", p); !denied(err) || !strings.Contains(err.Error(), write.MetadataRefusal) {
			t.Errorf("%s on a NetworkPolicy, no webhook key listed: %s, want refused, beginning %q", what, errString(err), write.MetadataRefusal)
		}
	}

	calls := labellingWebhook(t, s.w, []admissionregistrationv1.RuleWithOperations{
		rule("", "services"), rule("networking.k8s.io", "networkpolicies"),
		rule("cilium.io", "ciliumloadbalancerippools", "ciliumcidrgroups"), rule("dynamic-prefix.io", "dynamicprefixes")})

	// The writer's own writes, as it makes them: its entries and record.
	lbWrite := `{"metadata":{"annotations":{"dynamic-prefix.io/managed-blocks":"2001:db8:1::/64"}},` +
		`"spec":{"blocks":[{"cidr":"192.0.2.0/24"},{"cidr":"2001:db8:1::/64"}]}}`
	npWrite := `{"metadata":{"annotations":{"dynamic-prefix.io/managed-cidrs":"2001:db8:1::/64"}},"spec":{"ingress":[{"from":[` +
		`{"ipBlock":{"cidr":"10.0.0.0/8"}},{"ipBlock":{"cidr":"2001:db8:1::/64"}}]}]}}`
	const dpWrite = `{"metadata":{"finalizers":null}}`
	eventually(t, "the webhook called on the writer's update", func() (bool, string) {
		_ = s.patch(poolGVR, "", "lb", lbWrite)
		return calls.Load() > 0, "not called"
	})
	honest := map[string]objectPatch{
		"entries and record on an LB-IPAM pool":                               {poolGVR, "", "lb", lbWrite},
		"ipBlock and record on a NetworkPolicy":                               {networkPolicyGVR, "default", "lan", npWrite},
		"the existing operator's finalizer off a DynamicPrefix being deleted": {api.GVR, "", "old", dpWrite},
	}
	for what, p := range honest {
		if err := s.patch(p.gvr, p.ns, p.name, p.patch); !denied(err) || !strings.Contains(err.Error(), write.MetadataRefusal) {
			t.Errorf("the writer's %s, with the webhook's keys not listed: %s, want refused, beginning %q", what, errString(err), write.MetadataRefusal)
		}
	}

	// The admin lists the webhook's keys (the label exactly, the
	// annotation by its prefix) - and, in vain, keys the writer and the
	// policies read.
	// Each policy reads the list from its own informer: each write is
	// admitted once that policy has it (a loaded API server took seconds
	// between two of them in a fresh-clone run).
	listWebhookKeys(t, s.w, webhookLabel, webhookPrefix, "dynamic-prefix.io/", "app.kubernetes.io/managed-by", "advertise")
	for what, p := range honest {
		eventually(t, "the writer's "+what+", with what the webhook adds, listed, admitted", func() (bool, string) {
			err := s.patch(p.gvr, p.ns, p.name, p.patch)
			return err == nil, errString(err)
		})
	}
	if u := s.read(t, poolGVR, "", "lb"); u.GetLabels()[webhookLabel] != "net" || u.GetAnnotations()[webhookAnnotation] != "true" {
		t.Errorf("the LB-IPAM pool holds labels %v, annotations %v: the webhook's are missing (did it run?)", u.GetLabels(), u.GetAnnotations())
	}

	// What something reads stays frozen, listed or not; a key not listed
	// stays refused.
	refused := map[string]objectPatch{
		"an LB-IPAM pool given another DynamicPrefix (label)":     {poolGVR, "", "lb", `{"metadata":{"labels":{"dynamic-prefix.io/name":"other"}}}`},
		"an LB-IPAM pool given another DynamicPrefix":             {poolGVR, "", "lb", `{"metadata":{"annotations":{"dynamic-prefix.io/name":"other"}}}`},
		"an LB-IPAM pool given a subnet":                          {poolGVR, "", "lb", `{"metadata":{"annotations":{"dynamic-prefix.io/subnet":"public"}}}`},
		"an LB-IPAM pool labelled managed-by renumber":            {poolGVR, "", "lb", `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"renumber"}}}`},
		"an LB-IPAM pool given a key only like a listed one":      {poolGVR, "", "lb", `{"metadata":{"labels":{"policy.example.org/team2":"x"}}}`},
		"a NetworkPolicy following nothing":                       {networkPolicyGVR, "default", "lan", `{"metadata":{"annotations":{"dynamic-prefix.io/name":null}}}`},
		"a NetworkPolicy labelled advertise: bgp":                 {networkPolicyGVR, "default", "lan", `{"metadata":{"labels":{"advertise":"bgp"}}}`},
		"a CIDR group relabelled (a CiliumNetworkPolicy selects)": {groupGVR, "", "probe", `{"metadata":{"labels":{"role":"vpn"}}}`},
		"a Service relabelled (an LB-IPAM pool selects)":          {serviceGVR, "default", "web", `{"metadata":{"labels":{"expose":"public"}}}`},
		"a Service moved to another MetalLB pool":                 {serviceGVR, "default", "web", `{"metadata":{"annotations":{"metallb.io/address-pool":"public"}}}`},
		"a DynamicPrefix's dynamic-prefix.io/ label":              {api.GVR, "", "home", `{"metadata":{"labels":{"dynamic-prefix.io/name":"other"}}}`},
		"a DynamicPrefix's managed-by label":                      {api.GVR, "", "home", `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"renumber"}}}`},
	}
	for what, p := range gitOpsKeys {
		refused[what+" on a NetworkPolicy"] = objectPatch{networkPolicyGVR, "default", "lan", p}
		refused[what+" on an LB-IPAM pool"] = objectPatch{poolGVR, "", "lb", p}
		refused[what+" on a DynamicPrefix"] = objectPatch{api.GVR, "", "home", p}
	}
	for what, p := range refused {
		if err := s.patch(p.gvr, p.ns, p.name, p.patch); !denied(err) {
			t.Errorf("%s: %s", what, errString(err))
		}
	}

	// Where the webhook's label is read, the writer's honest write is
	// refused as a change of metadata, listed or not: the writer says so,
	// once.
	for what, p := range map[string]objectPatch{
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

// followingPoolAndPolicy makes the LB-IPAM pool lb and the NetworkPolicy
// default/lan, each following home.
func followingPoolAndPolicy(t *testing.T, s stolen) {
	t.Helper()
	apply(t, s.w, poolGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}}})
	apply(t, s.w, networkPolicyGVR, map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "lan", "namespace": "default", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec": map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress"}, "ingress": []any{
			map[string]any{"from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/8"}}}}}}})
}

// objectPatch is a merge patch of one object.
type objectPatch struct {
	gvr             schema.GroupVersionResource
	ns, name, patch string
}

// webhookPolicies are the writer's policies that hold the admin's list of
// webhook keys, as their first variable.
var webhookPolicies = []string{"renumber-writer-pools", "renumber-writer-owned", "renumber-writer-dynamicprefixes"}

// listWebhookKeys sets the admin's list of the keys their webhook adds in
// each policy that holds it, as a kustomize user's patch does (the chart
// renders admissionPolicies.webhookKeys there); the API server enforces it
// a moment later.
func listWebhookKeys(t *testing.T, w *world.World, keys ...string) {
	t.Helper()
	list, err := json.Marshal(append([]string{}, keys...))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/spec/variables/0/name", "value": "webhookKeys"},
		{"op": "replace", "path": "/spec/variables/0/expression", "value": string(list)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range webhookPolicies {
		if _, err := w.API.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Patch(t.Context(), name,
			types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("listing webhook keys in %s: %v", name, err)
		}
	}
}

// TestAServiceAWebhookLabelsIsReportedOnce (issue 42): a Service's labels
// stay frozen (selectors pick its pool and its announcements by them), so a
// mutating webhook that labels every update by the writer has every write
// of the writer's to it refused. The real writer says so once - one
// warning event on the Service naming the likely cause, one log line -
// through its first pass and a renumbering, where it logged "sync failed"
// at every retry and emitted no event; once the admin leaves the writer
// out of the webhook, the Service's next change brings its addresses.
func TestAServiceAWebhookLabelsIsReportedOnce(t *testing.T) {
	w := newWorld(t, 1)
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1", holdings.AnnotationIPs: "192.0.2.7"})
	labellingWebhook(t, w, []admissionregistrationv1.RuleWithOperations{rule("", "services")})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	waitEvent(t, w, write.RefusedForMetadata, "web")
	advertise(t, w, prefixB, prefixA)
	eventually(t, "home follows "+prefixB.String(), func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == prefixB.String(), st.CurrentPrefix
	})
	settleWrites()
	evs, err := w.API.Client.EventsV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		if e.Reason == write.RefusedForMetadata && e.Regarding.Name == "web" {
			n++
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
			if !strings.Contains(e.Note, "mutating webhook") {
				t.Errorf("the event says %q, want the likely cause (a mutating webhook)", e.Note)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d %s events for web through a renumbering, want 1", n, write.RefusedForMetadata)
	}
	if got := countLog(w, "writer-a.log", "the admission policy refused the writer's write"); got != 1 {
		t.Errorf("the writer's log says the refusal %d times, want once", got)
	}
	if got := countLog(w, "writer-a.log", "sync failed"); got != 0 {
		t.Errorf("the writer's log says \"sync failed\" %d times, want none", got)
	}
	for _, c := range dpStatus(t, w, "home").Conditions {
		if c.Type == "PoolsSynced" && (c.Status != "False" || !strings.Contains(c.Message, "web")) {
			t.Errorf("PoolsSynced %s %q, want False naming web", c.Status, c.Message)
		}
	}

	if err := w.API.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(t.Context(), "labels.policy.example.org", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	user := []string{"192.0.2.7", "192.0.2.8"}
	eventually(t, "web given its address once the webhook leaves the writer alone", func() (bool, string) {
		s, err := w.API.Client.CoreV1().Services("default").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := s.Annotations[holdings.AnnotationIPs]
		if strings.Contains(got, "2001:db8:") {
			return true, ""
		}
		// The admin's change of what the writer reads brings a pass (the
		// writer also looks again by itself, after write.RefusedLookAgain);
		// one made before the API server dropped the webhook is refused.
		user[0], user[1] = user[1], user[0]
		_, _ = w.API.Client.CoreV1().Services("default").Patch(t.Context(), "web", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+holdings.AnnotationIPs+`":"`+user[0]+`"}}}`), metav1.PatchOptions{})
		return false, got
	})
}

func rule(group string, resources ...string) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources}}
}

// labellingWebhook serves, over TLS on loopback, a mutating webhook that adds
// webhookLabel and webhookAnnotation to every object the writer's identity
// updates under rules, and registers it; it counts its calls.
func labellingWebhook(t *testing.T, w *world.World, rules []admissionregistrationv1.RuleWithOperations) *atomic.Int64 {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(rw, "not an AdmissionReview", http.StatusBadRequest)
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
		_ = json.NewEncoder(rw).Encode(review)
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
	if _, err := w.API.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(t.Context(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &calls
}
