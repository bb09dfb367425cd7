package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/tools/world"
)

// TestTheValuePolicyStaysInsideItsCostAtTheBounds: renumber-writer-values
// fails open, so an evaluation that errors admits - and one that ends
// false then evaluates its messageExpression with what is left of the
// budget. On objects at every bound renumber-writer-sizes sets, before and
// after, with every entry new (the dearest evaluation) and a status
// history at its bound: one entry outside, last in whichever key or rule
// the policy reads last, is refused by the shipped policy alone (so it did
// not err); and the writer's honest write is admitted by a copy of the
// policy that fails closed (so it evaluated to true within its cost). The
// Service's records name every entry, at their bound too, so
// renumber-writer-services (which fails closed) admits the honest write
// only if its record checks stay inside their cost there.
func TestTheValuePolicyStaysInsideItsCostAtTheBounds(t *testing.T) {
	s := stealWriterToken(t, nil)
	ctx := t.Context()
	w := s.w
	historyAtItsBound(t, w)
	id, err := w.API.ServiceAccountIn(ctx, world.Namespace, "renumber-writer", "")
	if err != nil {
		t.Fatal(err)
	}
	writer := dynamic.NewForConfigOrDie(id.Config)
	write := func(gvr schema.GroupVersionResource, ns, name, body string) error {
		_, err := writer.Resource(gvr).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}

	// n entries in prefix 2001:db8:<p>::/64 (p: 1..16, the history); bad:
	// the last one outside.
	entries := func(p, n int, cidr, bad bool) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("2001:db8:%x::%x", p, i+1)
			if bad && i == n-1 {
				out[i] = "2001:db8:bad::1"
			}
			if cidr {
				out[i] += "/128"
			}
		}
		return out
	}
	// A Service: 256 annotations, 16 DNS-target keys and both address keys
	// of 64 entries each, all replaced (bad: the one of key bad, -1 none,
	// ends outside).
	keys := []string{holdings.AnnotationIPs, holdings.AnnotationKubeVIPIPs}
	for i := range 16 {
		keys = append(keys, fmt.Sprintf("k%d.example.org/target", i))
	}
	// With the records that name every entry (renumber-writer-services:
	// each entry added is named, at their bound of 64 too): the keys of
	// the kind the outside entry is in hold the last but one entry twice
	// in its place, so that kind's entries stay 64.
	records := []string{holdings.AnnotationManagedIPs, holdings.AnnotationManagedTarget, holdings.AnnotationManagedTargetKeys}
	ann := func(p, bad int) map[string]any {
		out := map[string]any{}
		for i := range 256 - len(keys) - len(records) - 1 {
			out[fmt.Sprintf("example.org/user-%d", i)] = "x"
		}
		kind := func(i int) int { return min(i, 2) / 2 } // 0: address keys, 1: target keys
		named := [2][]string{}
		for i, k := range keys {
			l := entries(p, 64, false, i == bad)
			if bad >= 0 && i != bad && kind(i) == kind(bad) {
				l[63] = l[62]
			}
			out[k] = strings.Join(l, ",")
			for _, e := range l {
				if !slices.Contains(named[kind(i)], e) {
					named[kind(i)] = append(named[kind(i)], e)
				}
			}
		}
		out[records[0]], out[records[1]] = strings.Join(named[0], ","), strings.Join(named[1], ",")
		out[records[2]] = strings.Join(keys[2:], ",")
		return out
	}
	before := ann(16, -1)
	before["dynamic-prefix.io/name"] = "home"
	svc := map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "big", "namespace": "default", "annotations": before},
		"spec":     map[string]any{"type": "LoadBalancer", "ports": []any{map[string]any{"port": int64(443)}}}}
	// A NetworkPolicy: 4 rules of 64 ipBlocks a direction, beside 500 of
	// the tenant's pod selectors each (bad: the rule whose last ipBlock ends
	// outside, -1 none).
	rules := func(p int, dir string, bad int) []any {
		var out []any
		for r := range 4 {
			var peers []any
			for i := range 500 {
				peers = append(peers, map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": fmt.Sprintf("app-%d", i)}}})
			}
			for _, c := range entries(p, 64, true, r == bad) {
				peers = append(peers, map[string]any{"ipBlock": map[string]any{"cidr": c}})
			}
			out = append(out, map[string]any{dir: peers, "ports": []any{map[string]any{"port": int64(80 + r)}}})
		}
		return out
	}
	np := map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "big", "namespace": "default", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec": map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress", "Egress"},
			"ingress": rules(16, "from", -1), "egress": rules(16, "to", -1)}}
	// A CIDR group and a pool of 256 entries.
	list := func(p int, bad bool) []any {
		var out []any
		for q := p; q < p+4; q++ {
			for _, c := range entries(q, 64, true, bad && q == p+3) {
				out = append(out, c)
			}
		}
		return out
	}
	group := map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "big", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"externalCIDRs": list(13, false)}}
	blocks := func(p int, bad bool) []any {
		var out []any
		for _, c := range list(p, bad) {
			out = append(out, map[string]any{"cidr": c})
		}
		return out
	}
	pool := map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "big", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"blocks": blocks(13, false)}}
	// A tenant's huge one (as in TestATenantsHugePoliciesDoNotExhaustTheWriter):
	// a rule of one ipBlock, then 9 of 1,000 pod selectors (about 700 KiB).
	huge := func(cidr string) []any {
		out := []any{map[string]any{"from": []any{map[string]any{"ipBlock": map[string]any{"cidr": cidr}}}}}
		var selectors []any
		for i := range 1000 {
			selectors = append(selectors, map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
				"app": fmt.Sprintf("app-%d", i), "tier": "web", "team": "tenant"}}})
		}
		for range 9 {
			out = append(out, map[string]any{"from": selectors, "ports": []any{map[string]any{"port": int64(443)}}})
		}
		return out
	}
	hugeNP := map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "huge", "namespace": "default", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"podSelector": map[string]any{}, "ingress": huge("2001:db8:16::/64")}}
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{{serviceGVR, svc}, {networkPolicyGVR, np}, {networkPolicyGVR, hugeNP}, {groupGVR, group}, {poolGVR, pool}} {
		apply(t, w, o.gvr, o.obj)
	}
	// pooled is a write of spec to a pool-like object with its record
	// naming every entry (renumber-writer-pools: each entry added is
	// named); spell: how the record spells an entry.
	pooled := func(spec map[string]any, record string, spell func(string) string, entries ...[]any) string {
		var named []string
		for _, l := range entries {
			for _, e := range l {
				c, ok := e.(string)
				if m, isMap := e.(map[string]any); !ok && isMap {
					if b, isPeer := m["ipBlock"].(map[string]any); isPeer {
						m = b
					}
					c = m["cidr"].(string)
				}
				if c = spell(c); !slices.Contains(named, c) {
					named = append(named, c)
				}
			}
		}
		return jsonOf(t, map[string]any{"spec": spec, "metadata": map[string]any{"annotations": map[string]any{record: strings.Join(named, ",")}}})
	}
	asIs := func(c string) string { return c }
	cidrKey := func(c string) string { return "cidr=" + c }
	// ipBlocks are the ipBlock peers of rules.
	ipBlocks := func(rules ...[]any) []any {
		var out []any
		for _, rs := range rules {
			for _, r := range rs {
				for _, dir := range []string{"from", "to"} {
					peers, _ := r.(map[string]any)[dir].([]any)
					for _, p := range peers {
						if b, ok := p.(map[string]any)["ipBlock"]; ok {
							out = append(out, map[string]any{"ipBlock": b})
						}
					}
				}
			}
		}
		return out
	}
	npWrite := func(ingress, egress []any) string {
		spec := map[string]any{"ingress": ingress}
		if egress != nil {
			spec["egress"] = egress
		}
		return pooled(spec, "dynamic-prefix.io/managed-cidrs", asIs, ipBlocks(ingress, egress))
	}
	type attempt struct {
		gvr      schema.GroupVersionResource
		ns, body string
	}
	// Whatever the order the policy reads them in, one outside entry last
	// in the last it reads is refused - by the shipped policy alone, which
	// would admit it on an error.
	outside := map[string]attempt{
		"a CIDR group": {groupGVR, "", pooled(map[string]any{"externalCIDRs": list(1, true)}, "dynamic-prefix.io/managed-cidrs", asIs, list(1, true))},
		"a pool":       {poolGVR, "", pooled(map[string]any{"blocks": blocks(1, true)}, "dynamic-prefix.io/managed-blocks", cidrKey, blocks(1, true))},
	}
	for i, k := range keys {
		outside["a Service's "+k] = attempt{serviceGVR, "default", jsonOf(t, map[string]any{"metadata": map[string]any{"annotations": ann(1, i)}})}
	}
	for r := range 4 {
		outside[fmt.Sprintf("a NetworkPolicy's ingress rule %d", r)] = attempt{networkPolicyGVR, "default",
			npWrite(rules(1, "from", r), rules(1, "to", -1))}
		outside[fmt.Sprintf("a NetworkPolicy's egress rule %d", r)] = attempt{networkPolicyGVR, "default",
			npWrite(rules(1, "from", -1), rules(1, "to", r))}
	}
	for what, x := range outside {
		if err := write(x.gvr, x.ns, "big", x.body); !denied(err) {
			t.Errorf("%s at the bounds, one entry outside: got %v, want refused", what, errString(err))
		}
	}

	// The honest writes, with the measuring copy, once it refuses its probe.
	measure(t, w)
	apply(t, w, groupGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup", "metadata": map[string]any{"name": measureProbe}, "spec": map[string]any{"externalCIDRs": []any{}}})
	eventually(t, "the measuring copy enforced", func() (bool, string) {
		err := write(groupGVR, "", measureProbe, `{"spec":{"externalCIDRs":["198.51.100.0/24"]}}`)
		return err != nil && strings.Contains(err.Error(), measureProbe), errString(err)
	})
	if err := write(networkPolicyGVR, "default", "huge", npWrite(huge("2001:db8:1::/64"), nil)); err != nil {
		t.Errorf("a tenant's huge NetworkPolicy: refused: %v", err)
	}
	for what, x := range map[string]attempt{
		"a Service at every bound":       {serviceGVR, "default", jsonOf(t, map[string]any{"metadata": map[string]any{"annotations": ann(1, -1)}})},
		"a NetworkPolicy at every bound": {networkPolicyGVR, "default", npWrite(rules(1, "from", -1), rules(1, "to", -1))},
		"a CIDR group at its bound":      {groupGVR, "", pooled(map[string]any{"externalCIDRs": list(1, false)}, "dynamic-prefix.io/managed-cidrs", asIs, list(1, false))},
		"a pool at its bound":            {poolGVR, "", pooled(map[string]any{"blocks": blocks(1, false)}, "dynamic-prefix.io/managed-blocks", cidrKey, blocks(1, false))},
	} {
		if err := write(x.gvr, x.ns, "big", x.body); err != nil {
			t.Errorf("%s: refused (the value policy's evaluation did not end true): %v", what, err)
		}
	}
}

// historyAtItsBound gives home's status 16 history entries, the bound of
// renumber-writer-sizes: 2001:db8:1::/64 active and current, then
// 2001:db8:2::/64 to 2001:db8:10::/64 draining.
func historyAtItsBound(t *testing.T, w *world.World) {
	t.Helper()
	var history []string
	for i := range 16 {
		state := "draining"
		if i == 0 {
			state = "active"
		}
		history = append(history, fmt.Sprintf(`{"prefix":"2001:db8:%x::/64","state":"%s"}`, i+1, state))
	}
	status := `{"status":{"currentPrefix":"2001:db8:1::/64","history":[` + strings.Join(history, ",") + `]}}`
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(t.Context(), "home", types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// measureProbe is the object the measuring copy refuses, to say it is there.
const measureProbe = "measure-probe"

// measure installs a copy of renumber-writer-values that fails closed, and
// refuses writes to measureProbe.
func measure(t *testing.T, w *world.World) {
	t.Helper()
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(repo, "manifests", "writer", "policy-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(text), "\n---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: o}
		if u.GetName() != "renumber-writer-values" {
			continue
		}
		u.SetName("renumber-writer-values-measured")
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
		if u.GetKind() == "ValidatingAdmissionPolicy" {
			unstructured.SetNestedField(u.Object, "Fail", "spec", "failurePolicy")
			validations, _, _ := unstructured.NestedSlice(u.Object, "spec", "validations")
			validations = append(validations, map[string]any{"expression": "object.metadata.name != '" + measureProbe + "'", "message": measureProbe})
			unstructured.SetNestedSlice(u.Object, validations, "spec", "validations")
		} else {
			gvr.Resource = "validatingadmissionpolicybindings"
			unstructured.SetNestedField(u.Object, "renumber-writer-values-measured", "spec", "policyName")
		}
		if _, err := w.API.Dynamic.Resource(gvr).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
