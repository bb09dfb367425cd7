package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/tools/world"
)

var serviceGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// stolen is the writer's real token in a world with the shipped policies and
// the DynamicPrefix home, which follows 2001:db8:1::/64, drains
// 2001:db8:2::/64 and has expired 2001:db8:3::/64 (spec: spec, merged into
// the default acquisition).
type stolen struct {
	ctx    context.Context
	w      *world.World
	writer dynamic.Interface
}

// inside are the prefixes home's status lets the writer write into.
var inside = []string{"2001:db8:1::/64", "2001:db8:2::/64"}

func stealWriterToken(t *testing.T, spec map[string]any) stolen {
	t.Helper()
	w := newWorld(t, 0)
	ctx := t.Context()
	createDP(t, w, "home", spec)
	status := `{"status":{"currentPrefix":"2001:db8:1::/64","history":[` +
		`{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"draining"},` +
		`{"prefix":"2001:db8:3::/64","state":"expired"}]}}`
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	apply(t, w, groupGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "probe", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"externalCIDRs": []any{"198.51.100.0/24"}},
	})
	id, err := w.API.ServiceAccountIn(ctx, world.Namespace, "renumber-writer", "")
	if err != nil {
		t.Fatal(err)
	}
	s := stolen{ctx: ctx, w: w, writer: dynamic.NewForConfigOrDie(id.Config)}
	// Every policy, the value policy with its params read, before anything
	// is tried: each probe writes a CIDR of its own.
	var n int
	eventually(t, "value policy enforced", func() (bool, string) {
		n++
		err := s.patch(groupGVR, "", "probe", fmt.Sprintf(`{"spec":{"externalCIDRs":["198.51.100.0/24","2001:db8:bad:%x::/64"]}}`, n))
		return denied(err), errString(err)
	})
	// ... and renumber-writer-status, loaded on its own (on a loaded
	// machine later than the value policy: four status tests once found
	// every forged write admitted): an entry without a state, which it
	// alone refuses. One admitted before then is put back.
	eventually(t, "status policy enforced", func() (bool, string) {
		err := s.patch(api.GVR, "", "home", `{"status":{"history":[{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:4::/64"}]}}`, "status")
		return denied(err), errString(err)
	})
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	return s
}

func createNamespace(t *testing.T, w *world.World, name string) {
	t.Helper()
	if _, err := w.API.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func denied(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) }

// patch makes a merge patch as the writer.
func (s stolen) patch(gvr schema.GroupVersionResource, ns, name, body string, sub ...string) error {
	_, err := s.writer.Resource(gvr).Namespace(ns).Patch(s.ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, sub...)
	return err
}

// annotate sets a Service's annotations as the writer (nil removes one).
func (s stolen) annotate(ns, name string, ann map[string]any) error {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	return s.patch(serviceGVR, ns, name, string(body))
}

// read is an object as the admin sees it.
func (s stolen) read(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := s.w.API.Dynamic.Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// addresses are n addresses in prefix p (a /64 spelled "2001:db8:x::").
func addresses(p string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%x", p, i+1)
	}
	return out
}

// Issue 42 item 8a: renumber-writer-values fails open (Ignore) and its CEL
// has a cost limit. Padding an opted-in Service's lbipam.cilium.io/ips with
// 600 valid addresses, then writing the same list plus an outside address,
// pushed the evaluation past its cost: the outside address was admitted.
// renumber-writer-sizes (Fail) now bounds the lists first; within the bounds
// the value check holds.
func TestPaddingCannotPushTheValuePolicyPastItsCost(t *testing.T) {
	s := stealWriterToken(t, nil)
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home"})
	padded := addresses("2001:db8:1::", 600)
	s.annotate("default", "web", recordedAs(map[string]any{holdings.AnnotationIPs: strings.Join(padded, ",")}))
	err := s.annotate("default", "web", recordedAs(map[string]any{holdings.AnnotationIPs: strings.Join(append(padded, "2001:db8:bad::1"), ",")}))
	if got := s.read(t, serviceGVR, "default", "web").GetAnnotations()[holdings.AnnotationIPs]; strings.Contains(got, "bad") {
		t.Errorf("padded, an outside address was admitted (%v): the Service holds %d entries", errString(err), len(strings.Split(got, ",")))
	}
	full := addresses("2001:db8:1::", 64)
	if err := s.annotate("default", "web", recordedAs(map[string]any{holdings.AnnotationIPs: strings.Join(full, ",")})); err != nil {
		t.Errorf("64 addresses inside the prefixes (the bound): %v", err)
	}
	if err := s.annotate("default", "web", recordedAs(map[string]any{holdings.AnnotationIPs: strings.Join(append(full[:63], "2001:db8:bad::1"), ",")})); !denied(err) {
		t.Errorf("63 addresses and an outside one: got %v, want refused", errString(err))
	}
	if err := s.annotate("default", "web", recordedAs(map[string]any{holdings.AnnotationIPs: strings.Join(addresses("2001:db8:1::", 65), ",")})); !denied(err) {
		t.Errorf("65 addresses (over the bound): got %v, want refused", errString(err))
	}
}

// Issue 42 item 8b: with delegatedPrefixLength unset (0), a status naming
// the delegation ::/0 was admitted, after which any address was. The status
// policy now names no delegation without a delegatedPrefixLength, and the
// value policy trusts a delegation only as the spec makes it - even one the
// status holds already (written by someone else, or before the policy).
func TestADelegationOutsideTheSpecIsNeverTrusted(t *testing.T) {
	s := stealWriterToken(t, nil)
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home"})
	everything := `{"status":{"currentPrefix":"2001:db8:7::/64","delegatedPrefix":"::/0","history":[` +
		`{"prefix":"2001:db8:7::/64","state":"active","delegatedPrefix":"::/0"}]}}`
	if err := s.patch(api.GVR, "", "home", everything, "status"); !denied(err) {
		t.Errorf("the writer naming the delegation ::/0: got %v, want refused", errString(err))
	}
	// The admin (no policy binds it) writes it; once the value policy reads
	// it (2001:db8:7::/64 is admitted), the delegation admits nothing more.
	if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(t.Context(), "home", types.MergePatchType, []byte(everything), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the status read by the value policy", func() (bool, string) {
		err := s.annotate("default", "web", recordedAs(map[string]any{holdings.AnnotationIPs: "2001:db8:7::1"}))
		return err == nil, errString(err)
	})
	for _, a := range []string{"2001:db8:bad::1", "2001:db8:8::1", "192.0.2.1"} {
		if err := s.annotate("default", "web", recordedAs(map[string]any{holdings.AnnotationIPs: "2001:db8:7::1," + a})); !denied(err) {
			t.Errorf("%s, with ::/0 as the status's delegation: got %v, want refused", a, errString(err))
		}
	}
}

// Issue 42 item 11 (the policy's side): a DynamicPrefix whose
// spec.serviceNamespaces names default lets the writer give addresses only
// to Services and Gateways there. (Gateways: each place refused alone in
// tenant; before, the Gateway rule did not look at the namespace.)
func TestOnlyTheNamespacesTheAdminNamesGetAddresses(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"serviceNamespaces": []any{"default"}})
	if err := s.w.API.InstallGatewayAPI(s.ctx); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, s.w, "tenant")
	for _, ns := range []string{"default", "tenant"} {
		createServiceIn(t, s.w, ns, "web", map[string]string{"dynamic-prefix.io/name": "home"})
		apply(t, s.w, gatewayGVR, map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
			"metadata": map[string]any{"name": "web", "namespace": ns, "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
			"spec": map[string]any{"gatewayClassName": "cilium",
				"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}},
		})
	}
	// Each with the record naming the address, as the writer writes it
	// (renumber-writer-gateways refuses an address added unrecorded).
	recorded := `"` + holdings.AnnotationManagedIPs + `":"2001:db8:1::1"`
	places := map[string]string{
		"spec.addresses":             `{"metadata":{"annotations":{` + recorded + `}},"spec":{"addresses":[{"type":"IPAddress","value":"2001:db8:1::1"}]}}`,
		"the infrastructure address": `{"metadata":{"annotations":{` + recorded + `}},"spec":{"infrastructure":{"annotations":{"lbipam.cilium.io/ips":"2001:db8:1::1"}}}}`,
		"the DNS target":             `{"metadata":{"annotations":{` + recorded + `,"` + holdings.AnnotationTarget + `":"2001:db8:1::1"}}}`,
	}
	for what, body := range places {
		if err := s.patch(gatewayGVR, "default", "web", body); err != nil {
			t.Errorf("%s of a Gateway in default: %v", what, err)
		}
		if err := s.patch(gatewayGVR, "tenant", "web", body); !denied(err) {
			t.Errorf("%s of a Gateway in tenant: got %v, want refused", what, errString(err))
		}
	}
	if err := s.annotate("default", "web", recordedAs(map[string]any{holdings.AnnotationIPs: "2001:db8:1::1", holdings.AnnotationTarget: "2001:db8:1::1"})); err != nil {
		t.Errorf("an address for a Service in default: %v", err)
	}
	for k, v := range map[string]string{holdings.AnnotationIPs: "2001:db8:1::1", holdings.AnnotationTarget: "2001:db8:1::1"} {
		if err := s.annotate("tenant", "web", recordedAs(map[string]any{k: v})); !denied(err) {
			t.Errorf("%s on a Service in tenant: got %v, want refused", k, errString(err))
		}
	}
}

// Issue 42 item 9: on objects that follow nothing the writer may only take
// its own entries out. A NetworkPolicy peer was checked against every old
// rule, so 0.0.0.0/0 moved into another rule (on a following one too); a
// Service lost its user's address and DNS target, a NetworkPolicy its
// user's ipBlock. All are refused now; the writer's own entries (those its
// record names) still go.
func TestOnObjectsThatFollowNothingTheWriterOnlyTakesItsOwnOut(t *testing.T) {
	s := stealWriterToken(t, nil)
	rules := func(first, second []any) map[string]any {
		return map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Egress"}, "egress": []any{
			map[string]any{"to": first, "ports": []any{map[string]any{"port": int64(443)}}},
			map[string]any{"to": second, "ports": []any{map[string]any{"port": int64(22)}}}}}
	}
	world4 := map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0"}}
	lan := map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/8"}}
	ours := map[string]any{"ipBlock": map[string]any{"cidr": "2001:db8:1::/64"}}
	pods := map[string]any{"podSelector": map[string]any{}}
	for name, ann := range map[string]map[string]any{"free": {"dynamic-prefix.io/managed-cidrs": "2001:db8:1::/64"}, "lan": {"dynamic-prefix.io/name": "home"}} {
		apply(t, s.w, networkPolicyGVR, map[string]any{
			"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"metadata": map[string]any{"name": name, "namespace": "default", "annotations": ann},
			"spec":     rules([]any{world4, lan, ours}, []any{pods}),
		})
		body, _ := json.Marshal(map[string]any{"spec": rules([]any{lan, ours}, []any{pods, world4})})
		if err := s.patch(networkPolicyGVR, "default", name, string(body)); !denied(err) {
			t.Errorf("0.0.0.0/0 moved from port 443's rule to port 22's on %s: got %v, want refused", name, errString(err))
		}
	}
	body, _ := json.Marshal(map[string]any{"spec": rules([]any{lan, ours}, []any{pods})})
	if err := s.patch(networkPolicyGVR, "default", "free", string(body)); !denied(err) {
		t.Errorf("the user's 0.0.0.0/0 out of a rule that follows nothing: got %v, want refused", errString(err))
	}
	body, _ = json.Marshal(map[string]any{"spec": rules([]any{world4, lan}, []any{pods})})
	if err := s.patch(networkPolicyGVR, "default", "free", string(body)); err != nil {
		t.Errorf("the writer's ipBlock out of a rule that follows nothing: %v", err)
	}

	createService(t, s.w, "other", map[string]string{
		holdings.AnnotationIPs: "192.0.2.9,2001:db8:1::9", holdings.AnnotationManagedIPs: "2001:db8:1::9",
		holdings.AnnotationTarget: "a.example.org,2001:db8:1::9", holdings.AnnotationManagedTarget: "2001:db8:1::9"})
	for what, ann := range map[string]map[string]any{
		"the user's address":        {holdings.AnnotationIPs: "2001:db8:1::9"},
		"the user's address key":    {holdings.AnnotationIPs: nil},
		"the user's DNS target":     {holdings.AnnotationTarget: "2001:db8:1::9"},
		"the user's DNS target key": {holdings.AnnotationTarget: nil},
		"a record grown":            {holdings.AnnotationManagedIPs: "2001:db8:1::9,192.0.2.9"},
	} {
		if err := s.annotate("default", "other", ann); !denied(err) {
			t.Errorf("%s taken from a Service that follows nothing: got %v, want refused", what, errString(err))
		}
	}
	if err := s.annotate("default", "other", map[string]any{holdings.AnnotationIPs: "192.0.2.9", holdings.AnnotationManagedIPs: nil,
		holdings.AnnotationTarget: "a.example.org", holdings.AnnotationManagedTarget: nil}); err != nil {
		t.Errorf("the writer's own entries and records out of a Service that follows nothing: %v", err)
	}
	got := s.read(t, serviceGVR, "default", "other").GetAnnotations()
	if got[holdings.AnnotationIPs] != "192.0.2.9" || got[holdings.AnnotationTarget] != "a.example.org" {
		t.Errorf("the user's entries: %v", got)
	}
}
