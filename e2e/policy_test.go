package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// TestAgentCanTouchOnlyItsOwnDigest checks manifests/agent/policy.yaml against the
// real API server with a real pod-bound agent token.
func TestAgentCanTouchOnlyItsOwnDigest(t *testing.T) {
	agentPolicyHolds(t, newWorld(t, 2), world.Namespace, "renumber-agent")
}

// agentPolicyHolds checks the agent's admission policy in w, whose Nodes
// node1 and node2 exist, for the agent installed in namespace ns as the
// ServiceAccount sa.
func agentPolicyHolds(t *testing.T, w *world.World, ns, sa string) {
	t.Helper()
	ctx := t.Context()
	id, err := w.API.ServiceAccountIn(ctx, ns, sa, "node1")
	if err != nil {
		t.Fatal(err)
	}
	agent := kubernetes.NewForConfigOrDie(id.Config)
	patch := func(node, body string) error {
		_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	own := `{"metadata":{"annotations":{"` + digest.Annotation + `":"v1;eth0="}}}`
	// The policy takes a moment to be loaded by the API server after creation.
	eventually(t, "policy enforced", func() (bool, string) {
		err := patch("node2", own)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), errString(err)
	})
	if err := patch("node1", own); err != nil {
		t.Errorf("agent bound to node1 cannot write node1's digest: %v", err)
	}
	denied := map[string]struct{ node, body string }{
		"another node's digest": {"node2", own},
		"a label":               {"node1", `{"metadata":{"labels":{"evil":"true"}}}`},
		"another annotation":    {"node1", `{"metadata":{"annotations":{"other":"x"}}}`},
		"a taint":               {"node1", `{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`},
		"unschedulable":         {"node1", `{"spec":{"unschedulable":true}}`},
		"a finalizer":           {"node1", `{"metadata":{"finalizers":["evil.example.org/hold"]}}`},
		"an owner reference": {"node1", `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x",` +
			`"uid":"6b9f8a1e-0000-4000-8000-000000000001"}]}}`},
	}
	for name, d := range denied {
		if err := patch(d.node, d.body); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want denied", name, err)
		}
	}
	if err := agent.CoreV1().Nodes().Delete(ctx, "node1", metav1.DeleteOptions{}); err == nil {
		t.Error("agent deleted its node")
	}
}

func errString(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}

// TestWriterCanTouchOnlyItsOwnFields checks manifests/writer/policy.yaml
// against the real API server and the real CRD schemas, with the writer's
// real token: its own fields pass, anything else on the same objects is
// refused. (Every other e2e test runs the writer under the same policy.)
func TestWriterCanTouchOnlyItsOwnFields(t *testing.T) {
	writerPolicyHolds(t, newWorld(t, 0), world.Namespace, "renumber-writer")
}

// writerPolicyHolds checks the writer's admission policies in w, which has
// the CRDs of Cilium and renumber, for the writer installed in namespace ns.
func writerPolicyHolds(t *testing.T, w *world.World, ns, sa string) {
	t.Helper()
	ctx := t.Context()
	for _, install := range []func(context.Context) error{w.API.InstallMetalLB, w.API.InstallCalico, w.API.InstallGatewayAPI} {
		if err := install(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ipPools, addressPools := ippoolGVR, addressPoolGVR
	// What the writer writes is checked against the prefixes the status of
	// the DynamicPrefix names (policy-values.yaml, Kubernetes 1.31+): home
	// follows 2001:db8:1::/64, drains 2001:db8:2::/64, and 2001:db8:3::/64
	// has expired.
	v, err := w.API.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	minor, _ := strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
	byValue := minor >= 31
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0"},
		"prefixFilter":        map[string]any{"allowedPrefixes": []any{"2001:db8::/32"}, "minPrefixLength": 48, "maxPrefixLength": 64}},
		"subnets": []any{map[string]any{"name": "svc", "offset": 1, "prefixLength": 120, "bgp": map[string]any{"advertise": true, "community": "65000:100"}}}})
	status := `{"status":{"currentPrefix":"2001:db8:1::/64","history":[` +
		`{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"draining"},` +
		`{"prefix":"2001:db8:3::/64","state":"expired"}]}}`
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"grp", "probe"} {
		apply(t, w, groupGVR, map[string]any{
			"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
			"metadata": map[string]any{"name": name, "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
			"spec":     map[string]any{"externalCIDRs": []any{"198.51.100.0/24"}},
		})
	}
	apply(t, w, networkSetGVR, map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "NetworkSet",
		"metadata": map[string]any{"name": "lan", "namespace": "default", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"nets": []any{"10.0.0.0/8"}},
	})
	apply(t, w, globalNetworkSetGVR, map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "GlobalNetworkSet",
		"metadata": map[string]any{"name": "feed", "labels": map[string]any{"feed": "blocklist"}, "annotations": map[string]any{"dynamic-prefix.io/managed-cidrs": "2001:db8:1::/64"}},
		"spec":     map[string]any{"nets": []any{"203.0.113.0/24", "2001:db8:1::/64"}},
	})
	for name, ann := range map[string]map[string]any{"lan": {"dynamic-prefix.io/name": "home"}, "free": nil} {
		apply(t, w, networkPolicyGVR, map[string]any{
			"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"metadata": map[string]any{"name": name, "namespace": "default", "annotations": ann},
			"spec": map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress", "Egress"},
				"ingress": []any{map[string]any{"from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "2001:db8:1::/64"}},
					map[string]any{"podSelector": map[string]any{}}}, "ports": []any{map[string]any{"port": int64(80)}}}},
				"egress": []any{map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "2001:db8:1::/64"}}}}}},
		})
	}
	// A pool that follows nothing: its entries can go, no more come.
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "free", "annotations": map[string]any{"dynamic-prefix.io/managed-blocks": "cidr=2001:db8:1::/64"}},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}, map[string]any{"cidr": "2001:db8:1::/64"}}},
	})
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", "owner": "user"})
	// A Service that stopped following (or never did): the writer's entries can go, no more come.
	createService(t, w, "other", map[string]string{"lbipam.cilium.io/ips": "192.0.2.9,2001:db8:1::9", "external-dns.kubernetes.io/target": "a.example.org,2001:db8:1::9",
		"dynamic-prefix.io/managed-ips": "2001:db8:1::9", "dynamic-prefix.io/managed-targets": "2001:db8:1::9"})
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec": map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}},
			"serviceSelector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
	})
	apply(t, w, ipPools, map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "user", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"cidr": "2001:db8:1::/64", "natOutgoing": false},
	})
	apply(t, w, advertGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement", "metadata": map[string]any{"name": "users"},
		"spec": map[string]any{"advertisements": []any{map[string]any{"advertisementType": "PodCIDR"}}},
	})
	// The existing operator's advertisements, which the writer adopts.
	for _, name := range []string{"dp-home-svc", "dp-home-old"} {
		apply(t, w, advertGVR, map[string]any{
			"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement", "metadata": map[string]any{"name": name,
				"labels": map[string]any{"app.kubernetes.io/managed-by": "dynamic-prefix-operator", "dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "svc"}},
			"spec": map[string]any{"advertisements": []any{map[string]any{"advertisementType": "Service",
				"service": map[string]any{"addresses": []any{"LoadBalancerIP"}}}}},
		})
	}
	if _, err := w.API.Dynamic.Resource(addressPools).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
		"metadata": map[string]any{"name": "mlb", "namespace": "default", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"addresses": []any{"192.0.2.0/24"}, "autoAssign": true},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A Gateway that follows, beside the user's address and
	// infrastructure annotation; one that does not, holding entries its
	// record names.
	for name, doc := range map[string]map[string]any{
		"gw": {"annotations": map[string]any{"dynamic-prefix.io/name": "home", "owner": "user"},
			"addresses": []any{"192.0.2.9"}, "lbipam": nil},
		"gwfree": {"annotations": map[string]any{"dynamic-prefix.io/managed-ips": "2001:db8:1::9", "external-dns.kubernetes.io/target": "a.example.org,2001:db8:1::9"},
			"addresses": []any{"192.0.2.9", "2001:db8:1::9"}, "lbipam": "192.0.2.9,2001:db8:1::9"},
	} {
		var addresses []any
		for _, a := range doc["addresses"].([]any) {
			addresses = append(addresses, map[string]any{"type": "IPAddress", "value": a})
		}
		infra := map[string]any{"example.org/team": "web"}
		if v := doc["lbipam"]; v != nil {
			infra["lbipam.cilium.io/ips"] = v
		}
		apply(t, w, gatewayGVR, map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
			"metadata": map[string]any{"name": name, "namespace": "default", "annotations": doc["annotations"]},
			"spec": map[string]any{"gatewayClassName": "cilium", "addresses": addresses, "infrastructure": map[string]any{"annotations": infra},
				"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}},
		})
	}

	id, err := w.API.ServiceAccountIn(ctx, ns, sa, "")
	if err != nil {
		t.Fatal(err)
	}
	writer := dynamic.NewForConfigOrDie(id.Config)
	type write struct {
		gvr      schema.GroupVersionResource
		ns, name string
		patch    string // merge patch; "create:"+object or "delete"
	}
	do := func(x write) error {
		res := writer.Resource(x.gvr).Namespace(x.ns)
		switch {
		case x.patch == "delete":
			return res.Delete(ctx, x.name, metav1.DeleteOptions{})
		case strings.HasPrefix(x.patch, "create:"):
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON([]byte(strings.TrimPrefix(x.patch, "create:"))); err != nil {
				t.Fatal(err)
			}
			_, err := res.Create(ctx, u, metav1.CreateOptions{})
			return err
		}
		var sub []string
		if x.gvr == api.GVR {
			sub = []string{"status"} // the writer writes only a DynamicPrefix's status
		}
		_, err := res.Patch(ctx, x.name, types.MergePatchType, []byte(x.patch), metav1.PatchOptions{}, sub...)
		return err
	}
	svc := schema.GroupVersionResource{Version: "v1", Resource: "services"}
	denied := func(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) }
	// The policies take a moment to be loaded by the API server after creation.
	eventually(t, "policy enforced", func() (bool, string) {
		err := do(write{svc, "default", "web", `{"spec":{"ports":[{"port":80}]}}`})
		return denied(err), errString(err)
	})
	if byValue {
		// The value policy also waits for its params, the DynamicPrefixes,
		// to be read: each probe writes a CIDR of its own, so one let
		// through before then proves nothing later.
		var n int
		eventually(t, "value policy enforced", func() (bool, string) {
			n++
			err := do(write{groupGVR, "", "probe", fmt.Sprintf(`{"spec":{"externalCIDRs":["198.51.100.0/24","2001:db8:bad:%x::/64"]}}`, n)})
			return denied(err), errString(err)
		})
	}

	allowed := map[string]write{
		"a Service's addresses and records": {svc, "default", "web", `{"metadata":{"annotations":{"lbipam.cilium.io/ips":"2001:db8:1::1","dynamic-prefix.io/managed-ips":"2001:db8:1::1"}}}`},
		// Once the load balancer published it (below).
		"a Service's nudge":           {svc, "default", "web", `{"metadata":{"annotations":{"dynamic-prefix.io/l2-nudged":"2001:db8:1::1"}}}`},
		"a Service's DNS targets":     {svc, "default", "web", `{"metadata":{"annotations":{"external-dns.kubernetes.io/target":"2001:db8:1::1","external-dns.alpha.kubernetes.io/target":"2001:db8:1::1","dynamic-prefix.io/managed-targets":"2001:db8:1::1"}}}`},
		"a Service's records removed": {svc, "default", "web", `{"metadata":{"annotations":{"dynamic-prefix.io/l2-nudged":null}}}`},
		"its entries out of a Service that does not follow": {svc, "default", "other",
			`{"metadata":{"annotations":{"lbipam.cilium.io/ips":"192.0.2.9","external-dns.kubernetes.io/target":"a.example.org"}}}`},
		"a pool's blocks and record":      {poolGVR, "", "lb", `{"metadata":{"annotations":{"dynamic-prefix.io/managed-blocks":"2001:db8:1::/64"}},"spec":{"blocks":[{"cidr":"192.0.2.0/24"},{"cidr":"2001:db8:1::/64"}]}}`},
		"a MetalLB pool's addresses":      {addressPools, "default", "mlb", `{"metadata":{"annotations":{"dynamic-prefix.io/managed-addresses":"2001:db8:1::/64"}},"spec":{"addresses":["192.0.2.0/24","2001:db8:1::/64"]}}`},
		"a Calico pool's CIDR and record": {ipPools, "", "user", `{"metadata":{"annotations":{"dynamic-prefix.io/managed-blocks":"2001:db8:2::/64"}},"spec":{"cidr":"2001:db8:2::/64"}}`},
		"a sibling created": {ipPools, "", "user-1", `create:{"apiVersion":"crd.projectcalico.org/v1","kind":"IPPool","metadata":{"name":"user-1",` +
			`"labels":{"app.kubernetes.io/managed-by":"renumber","dynamic-prefix.io/name":"home","dynamic-prefix.io/sibling-of":"user"},` +
			`"ownerReferences":[{"apiVersion":"crd.projectcalico.org/v1","kind":"IPPool","name":"user","uid":"` + string(get(t, w, ipPools, "user").GetUID()) + `"}]},` +
			`"spec":{"cidr":"2001:db8:2::/64","disabled":true,"natOutgoing":false}}`}, // a sibling is for a draining prefix
		"a CIDR group's CIDRs":                        {groupGVR, "", "grp", `{"metadata":{"annotations":{"dynamic-prefix.io/managed-cidrs":"2001:db8:1::/72,2001:db8:2::ff00:0:0:0/72"}},"spec":{"externalCIDRs":["198.51.100.0/24","2001:db8:1::/72","2001:db8:2::ff00:0:0:0/72"]}}`},
		"a pool's range":                              {poolGVR, "", "lb", `{"metadata":{"annotations":{"dynamic-prefix.io/managed-blocks":"cidr=2001:db8:1::/64,range=2001:db8:2::f000-2001:db8:2::ffff"}},"spec":{"blocks":[{"cidr":"192.0.2.0/24"},{"cidr":"2001:db8:1::/64"},{"start":"2001:db8:2::f000","stop":"2001:db8:2::ffff"}]}}`},
		"a MetalLB range":                             {addressPools, "default", "mlb", `{"metadata":{"annotations":{"dynamic-prefix.io/managed-addresses":"2001:db8:1::/64,2001:db8:2::10-2001:db8:2::20"}},"spec":{"addresses":["192.0.2.0/24","2001:db8:1::/64","2001:db8:2::10-2001:db8:2::20"]}}`},
		"an entry out of a pool that follows nothing": {poolGVR, "", "free", `{"spec":{"blocks":[{"cidr":"192.0.2.0/24"}]}}`},
		"a network set's nets and record":             {networkSetGVR, "default", "lan", `{"metadata":{"annotations":{"dynamic-prefix.io/managed-cidrs":"2001:db8:1::/64,2001:db8:2::/64"}},"spec":{"nets":["10.0.0.0/8","2001:db8:1::/64","2001:db8:2::/64"]}}`},
		"a net out of a set that follows nothing":     {globalNetworkSetGVR, "", "feed", `{"spec":{"nets":["203.0.113.0/24"]}}`},
		"a Gateway's addresses, infrastructure annotation, DNS targets and record": {gatewayGVR, "default", "gw",
			`{"metadata":{"annotations":{"dynamic-prefix.io/managed-ips":"2001:db8:1::1","external-dns.kubernetes.io/target":"2001:db8:1::1","external-dns.alpha.kubernetes.io/target":"2001:db8:1::1"}},` +
				`"spec":{"addresses":[{"type":"IPAddress","value":"192.0.2.9"},{"type":"IPAddress","value":"2001:db8:1::1"}],"infrastructure":{"annotations":{"lbipam.cilium.io/ips":"192.0.2.9,2001:db8:1::1"}}}}`},
		"its entries out of a Gateway that does not follow": {gatewayGVR, "default", "gwfree",
			`{"metadata":{"annotations":{"dynamic-prefix.io/managed-ips":null,"external-dns.kubernetes.io/target":"a.example.org"}},` +
				`"spec":{"addresses":[{"type":"IPAddress","value":"192.0.2.9"}],"infrastructure":{"annotations":{"lbipam.cilium.io/ips":"192.0.2.9"}}}}`},
		"a policy's ipBlocks and record": {networkPolicyGVR, "default", "lan", `{"metadata":{"annotations":{"dynamic-prefix.io/managed-cidrs":"2001:db8:2::/64,2001:db8:1::/64"}},` +
			`"spec":{"ingress":[{"from":[{"podSelector":{}},{"ipBlock":{"cidr":"2001:db8:2::/64","except":["2001:db8:2::/120"]}},{"ipBlock":{"cidr":"2001:db8:1::/64"}}],"ports":[{"port":80}]}],` +
			`"egress":[{"to":[{"ipBlock":{"cidr":"2001:db8:2::/64"}},{"ipBlock":{"cidr":"2001:db8:1::/64"}}]}]}}`},
	}
	publish(t, w, "web", "2001:db8:1::1") // the nudge names only what the load balancer publishes
	for _, name := range slices.Sorted(maps.Keys(allowed)) {
		if err := do(allowed[name]); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	if err := do(write{ipPools, "", "user-1", "delete"}); err != nil {
		t.Errorf("deleting its own sibling: %v", err)
	}
	if err := do(write{advertGVR, "", "dp-home-svc", `{"spec":{"advertisements":[{"advertisementType":"Service","service":{"addresses":["LoadBalancerIP"]},"attributes":{"communities":{"standard":["65000:100"]}}}]}}`}); err != nil {
		t.Errorf("the spec of the existing operator's advertisement: %v", err)
	}
	if err := do(write{advertGVR, "", "dp-home-old", "delete"}); err != nil {
		t.Errorf("deleting the existing operator's advertisement: %v", err)
	}

	refused := map[string]write{
		"a Service's ports":                                        {svc, "default", "web", `{"spec":{"ports":[{"port":80}]}}`},
		"a Service's label":                                        {svc, "default", "web", `{"metadata":{"labels":{"evil":"true"}}}`},
		"a Service's user annotation":                              {svc, "default", "web", `{"metadata":{"annotations":{"owner":"writer"}}}`},
		"a Service's name annotation":                              {svc, "default", "web", `{"metadata":{"annotations":{"dynamic-prefix.io/name":null}}}`},
		"a Service deleted":                                        {svc, "default", "web", "delete"},
		"an address on a Service that does not follow":             {svc, "default", "other", `{"metadata":{"annotations":{"lbipam.cilium.io/ips":"192.0.2.9,2001:db8:bad::1"}}}`},
		"a DNS target on a Service that does not follow":           {svc, "default", "other", `{"metadata":{"annotations":{"external-dns.alpha.kubernetes.io/target":"2001:db8:bad::1"}}}`},
		"a pool's selector":                                        {poolGVR, "", "lb", `{"spec":{"serviceSelector":{"matchLabels":{"app":"all"}}}}`},
		"a pool disabled":                                          {poolGVR, "", "lb", `{"spec":{"disabled":true}}`},
		"a pool's DynamicPrefix label":                             {poolGVR, "", "lb", `{"metadata":{"labels":{"dynamic-prefix.io/name":"other"}}}`},
		"a pool's label no webhook key lists":                      {poolGVR, "", "lb", `{"metadata":{"labels":{"evil":"true"}}}`},
		"a pool's annotation no webhook key lists":                 {poolGVR, "", "lb", `{"metadata":{"annotations":{"argocd.argoproj.io/tracking-id":"evil"}}}`},
		"a CIDR group's label (a CiliumNetworkPolicy selects it)":  {groupGVR, "", "grp", `{"metadata":{"labels":{"role":"everyone"}}}`},
		"a MetalLB pool's label (an advertisement selects it)":     {addressPools, "default", "mlb", `{"metadata":{"labels":{"announce":"everywhere"}}}`},
		"a pool's name annotation":                                 {poolGVR, "", "lb", `{"metadata":{"annotations":{"dynamic-prefix.io/name":"other"}}}`},
		"a MetalLB pool's autoAssign":                              {addressPools, "default", "mlb", `{"spec":{"autoAssign":false}}`},
		"a Calico pool's NAT":                                      {ipPools, "", "user", `{"spec":{"natOutgoing":true}}`},
		"a Calico pool taken over":                                 {ipPools, "", "user", `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"renumber"}}}`},
		"a Calico pool deleted":                                    {ipPools, "", "user", "delete"},
		"an unlabelled pool created":                               {ipPools, "", "x", `create:{"apiVersion":"crd.projectcalico.org/v1","kind":"IPPool","metadata":{"name":"x"},"spec":{"cidr":"2001:db8:9::/64"}}`},
		"the user's advertisement":                                 {advertGVR, "", "users", `{"spec":{"advertisements":[{"advertisementType":"Service"}]}}`},
		"the user's advertisement deleted":                         {advertGVR, "", "users", "delete"},
		"the operator's advertisement relabelled":                  {advertGVR, "", "dp-home-svc", `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"renumber"}}}`},
		"the operator's advertisement's record annotated":          {advertGVR, "", "dp-home-svc", `{"metadata":{"annotations":{"dynamic-prefix.io/last-sync":"y"}}}`},
		"an entry into a pool that follows nothing":                {poolGVR, "", "free", `{"spec":{"blocks":[{"cidr":"192.0.2.0/24"},{"cidr":"2001:db8:1::/64"}]}}`},
		"the user's entry out of a pool that follows nothing":      {poolGVR, "", "free", `{"spec":{"blocks":[]}}`},
		"the user's net out of a set that follows nothing":         {globalNetworkSetGVR, "", "feed", `{"spec":{"nets":[]}}`},
		"a record grown on a pool that follows nothing":            {poolGVR, "", "free", `{"metadata":{"annotations":{"dynamic-prefix.io/managed-blocks":"cidr=2001:db8:1::/64,cidr=192.0.2.0/24"}}}`},
		"a net into a set that follows nothing":                    {globalNetworkSetGVR, "", "feed", `{"spec":{"nets":["2001:db8:1::/64"]}}`},
		"a network set's label":                                    {networkSetGVR, "default", "lan", `{"metadata":{"labels":{"role":"everyone"}}}`},
		"a network set's name annotation":                          {networkSetGVR, "default", "lan", `{"metadata":{"annotations":{"dynamic-prefix.io/name":"other"}}}`},
		"a network set deleted":                                    {networkSetGVR, "default", "lan", "delete"},
		"a policy's port":                                          {networkPolicyGVR, "default", "lan", `{"spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"2001:db8:1::/64"}},{"podSelector":{}}],"ports":[{"port":22}]}]}}`},
		"a policy's selector peer removed":                         {networkPolicyGVR, "default", "lan", `{"spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"2001:db8:1::/64"}}],"ports":[{"port":80}]}]}}`},
		"a policy rule emptied":                                    {networkPolicyGVR, "default", "lan", `{"spec":{"egress":[{"to":[]}]}}`},
		"a policy rule added":                                      {networkPolicyGVR, "default", "lan", `{"spec":{"egress":[{"to":[{"ipBlock":{"cidr":"2001:db8:1::/64"}}]},{"ports":[{"port":53}]}]}}`},
		"a policy's pods":                                          {networkPolicyGVR, "default", "lan", `{"spec":{"podSelector":{"matchLabels":{"app":"none"}}}}`},
		"an ipBlock into a policy that follows nothing":            {networkPolicyGVR, "default", "free", `{"spec":{"egress":[{"to":[{"ipBlock":{"cidr":"2001:db8:1::/64"}},{"ipBlock":{"cidr":"2001:db8:2::/64"}}]}]}}`},
		"a Gateway's listeners":                                    {gatewayGVR, "default", "gw", `{"spec":{"listeners":[{"name":"ssh","port":22,"protocol":"TCP"}]}}`},
		"a Gateway's class":                                        {gatewayGVR, "default", "gw", `{"spec":{"gatewayClassName":"other"}}`},
		"a Gateway's own infrastructure annotation":                {gatewayGVR, "default", "gw", `{"spec":{"infrastructure":{"annotations":{"example.org/team":"evil"}}}}`},
		"a Gateway's infrastructure label":                         {gatewayGVR, "default", "gw", `{"spec":{"infrastructure":{"labels":{"evil":"true"}}}}`},
		"a Gateway's label":                                        {gatewayGVR, "default", "gw", `{"metadata":{"labels":{"evil":"true"}}}`},
		"a Gateway's user annotation":                              {gatewayGVR, "default", "gw", `{"metadata":{"annotations":{"owner":"writer"}}}`},
		"a Gateway deleted":                                        {gatewayGVR, "default", "gw", "delete"},
		"an address on a Gateway that does not follow":             {gatewayGVR, "default", "gwfree", `{"spec":{"addresses":[{"type":"IPAddress","value":"192.0.2.9"},{"type":"IPAddress","value":"2001:db8:1::2"}]}}`},
		"an LB-IPAM address on a Gateway that does not follow":     {gatewayGVR, "default", "gwfree", `{"spec":{"infrastructure":{"annotations":{"lbipam.cilium.io/ips":"192.0.2.9,2001:db8:1::2"}}}}`},
		"the user's address out of a Gateway that does not follow": {gatewayGVR, "default", "gwfree", `{"spec":{"addresses":null}}`},
		"a sibling without its DynamicPrefix":                      {ipPools, "", "user-3", `create:{"apiVersion":"crd.projectcalico.org/v1","kind":"IPPool","metadata":{"name":"user-3","labels":{"app.kubernetes.io/managed-by":"renumber"}},"spec":{"cidr":"2001:db8:1::/64","disabled":true}}`},
	}
	if byValue {
		for name, x := range map[string]write{
			"a pool block outside the prefixes":        {poolGVR, "", "lb", `{"spec":{"blocks":[{"cidr":"192.0.2.0/24"},{"cidr":"2001:db8:bad::/64"}]}}`},
			"a pool block in an expired prefix":        {poolGVR, "", "lb", `{"spec":{"blocks":[{"cidr":"192.0.2.0/24"},{"cidr":"2001:db8:3::/64"}]}}`},
			"a pool range reaching outside":            {poolGVR, "", "lb", `{"spec":{"blocks":[{"start":"2001:db8:1::1","stop":"2001:db8:bad::1"}]}}`},
			"a CIDR group's CIDR outside the prefixes": {groupGVR, "", "grp", `{"spec":{"externalCIDRs":["2001:db8::/32"]}}`},
			"a network set's net outside the prefixes": {networkSetGVR, "default", "lan", `{"spec":{"nets":["10.0.0.0/8","::/0"]}}`},
			"a policy ipBlock outside the prefixes":    {networkPolicyGVR, "default", "lan", `{"spec":{"egress":[{"to":[{"ipBlock":{"cidr":"::/0"}}]}]}}`},
			"a MetalLB range outside the prefixes":     {addressPools, "default", "mlb", `{"spec":{"addresses":["2001:db8:bad::10-2001:db8:bad::20"]}}`},
			"a Calico pool's CIDR outside":             {ipPools, "", "user", `{"spec":{"cidr":"2001:db8:bad::/64"}}`},
			"a sibling outside the prefixes": {ipPools, "", "user-2", `create:{"apiVersion":"crd.projectcalico.org/v1","kind":"IPPool","metadata":{"name":"user-2",` +
				`"labels":{"app.kubernetes.io/managed-by":"renumber","dynamic-prefix.io/name":"home","dynamic-prefix.io/sibling-of":"user"},` +
				`"ownerReferences":[{"apiVersion":"crd.projectcalico.org/v1","kind":"IPPool","name":"user","uid":"` + string(get(t, w, ipPools, "user").GetUID()) + `"}]},` +
				`"spec":{"cidr":"2001:db8:bad::/64","disabled":true}}`},
			"a Service address outside the prefixes": {svc, "default", "web", `{"metadata":{"annotations":{"lbipam.cilium.io/ips":"2001:db8:1::1,2001:db8:bad::1"}}}`},
			"a DNS target outside the prefixes":      {svc, "default", "web", `{"metadata":{"annotations":{"external-dns.kubernetes.io/target":"2001:db8:bad::1"}}}`},
			"a Gateway address outside the prefixes": {gatewayGVR, "default", "gw", `{"spec":{"addresses":[{"type":"IPAddress","value":"192.0.2.9"},{"type":"IPAddress","value":"2001:db8:bad::1"}]}}`},
			"a Gateway LB-IPAM address outside":      {gatewayGVR, "default", "gw", `{"spec":{"infrastructure":{"annotations":{"lbipam.cilium.io/ips":"192.0.2.9,2001:db8:bad::1"}}}}`},
			"a Gateway DNS target outside":           {gatewayGVR, "default", "gw", `{"metadata":{"annotations":{"external-dns.alpha.kubernetes.io/target":"2001:db8:bad::1"}}}`},
		} {
			refused[name] = x
		}
	}
	for _, name := range slices.Sorted(maps.Keys(refused)) {
		if err := do(refused[name]); !denied(err) {
			t.Errorf("%s: got %v, want refused", name, errString(err))
		}
	}
	// The status, on every version (renumber-writer-sizes bounds its history).
	if err := do(write{api.GVR, "", "home", `{"status":{"prefixSource":"router-advertisement"}}`}); err != nil {
		t.Errorf("the writer writing a status: %v", err)
	}
	var long []string
	for i := range 17 {
		long = append(long, fmt.Sprintf(`{"prefix":"2001:db8:1::/64","state":"expired","acquiredAt":"2026-01-01T00:00:%02dZ"}`, i))
	}
	if err := do(write{api.GVR, "", "home", `{"status":{"history":[` + strings.Join(long, ",") + `]}}`}); !denied(err) {
		t.Errorf("a status history of 17 entries: got %v, want refused", errString(err))
	}
	if !byValue {
		return
	}
	// What the status may name: what home's prefixFilter accepts (inside
	// 2001:db8::/32, /48 to /64); what it named before stays. The
	// renumbering as the writer writes it: the new entry acquired when the
	// old one drains from.
	named := func(cur string) write {
		return write{api.GVR, "", "home", `{"status":{"currentPrefix":"` + cur + `","history":[{"prefix":"` + cur +
			`","state":"active","acquiredAt":"2029-01-01T00:00:00Z"},{"prefix":"2001:db8:1::/64","state":"draining","deprecatedAt":"2029-01-01T00:00:00Z"},` +
			`{"prefix":"2001:db8:3::/64","state":"expired"}]}}`}
	}
	for name, cur := range map[string]string{"outside allowedPrefixes": "2001:db9:1::/64", "longer than /64": "2001:db8:5::/80",
		"shorter than /48": "2001:db8::/40", "not global unicast": "fd00:1::/64"} {
		if err := do(named(cur)); !denied(err) {
			t.Errorf("a status naming a prefix %s (%s): got %v, want refused", name, cur, errString(err))
		}
	}
	if err := do(named("2001:db8:4::/64")); err != nil {
		t.Errorf("a status naming a prefix the filter accepts: %v", err)
	}

	// A delegation (values are admitted anywhere in it) is only ever the
	// prefix shortened to the spec's delegatedPrefixLength.
	delegated := func(cur, delegation, draining string) write {
		return write{api.GVR, "", "home", `{"status":{"currentPrefix":"` + cur + `","delegatedPrefix":"` + delegation + `","history":[{"prefix":"` + cur +
			`","state":"active","acquiredAt":"2029-01-01T00:00:00Z","delegatedPrefix":"` + delegation + `"},` +
			`{"prefix":"2001:db8:1::/64","state":"draining","deprecatedAt":"2029-01-01T00:00:00Z","delegatedPrefix":"` + draining + `"}]}}`}
	}
	if err := do(delegated("2001:db8:4::/64", "2001:db8:4::/48", "2001:db8:1::/48")); !denied(err) {
		t.Errorf("a delegation without delegatedPrefixLength: got %v, want refused", errString(err))
	}
	patch := []byte(`{"spec":{"acquisition":{"routerAdvertisement":{"delegatedPrefixLength":48}}}}`)
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][3]string{
		"of another length":      {"2001:db8:4::/64", "2001:db8::/32", "2001:db8:1::/48"},
		"not holding the prefix": {"2001:db8:4::/64", "2001:db8:5::/48", "2001:db8:1::/48"},
		"the whole Internet":     {"2001:db8:4::/64", "::/0", "2001:db8:1::/48"},
		"unmasked":               {"2001:db8:4::/64", "2001:db8:4::1/48", "2001:db8:1::/48"},
		"a draining one's wrong": {"2001:db8:4::/64", "2001:db8:4::/48", "2001:db8:2::/48"},
	} {
		if err := do(delegated(args[0], args[1], args[2])); !denied(err) {
			t.Errorf("a status naming a delegation %s (%s): got %v, want refused", name, args[1], errString(err))
		}
	}
	if err := do(delegated("2001:db8:4::/64", "2001:db8:4::/48", "2001:db8:1::/48")); err != nil {
		t.Errorf("a status naming the delegations the spec makes: %v", err)
	}
}

// TestTheGuardsHoldInAnyNamespace: the admission policies guard the agent and
// the writer wherever the install puts them - a kustomize overlay that sets
// another namespace, `helm install -n` another one, and there with
// ServiceAccounts the user named - with the same checks as in
// renumber-system.
func TestTheGuardsHoldInAnyNamespace(t *testing.T) {
	t.Parallel() // its subtests start worlds: among the other world tests, not before them
	for _, install := range []string{"kustomize", "helm", "helm with its own ServiceAccounts"} {
		t.Run(strings.ReplaceAll(install, " ", "_"), func(t *testing.T) {
			w := bareWorldWith(t, 2)
			ctx := t.Context()
			ns := "home-" + strings.Fields(install)[0]
			if install != "kustomize" && install != "helm" {
				ns = "home-own-sa"
			}
			if err := w.API.InstallCiliumCRDs(ctx); err != nil {
				t.Fatal(err)
			}
			repo, err := world.RepoRoot()
			if err != nil {
				t.Fatal(err)
			}
			switch install {
			case "kustomize":
				dir := filepath.Join(repo, "_out", "overlay-"+w.ID)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				overlay := "namespace: " + ns + "\nresources: [../../manifests]\n"
				if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command("kubectl", "kustomize", dir).Output()
				if err != nil {
					t.Fatalf("kubectl kustomize: %v", err)
				}
				if strings.Contains(string(out), "renumber-system") {
					t.Errorf("the overlay's objects still name renumber-system")
				}
				if err := w.API.ApplyYAML(ctx, out); err != nil {
					t.Fatalf("applying the overlay: %v", err)
				}
			case "helm", "helm with its own ServiceAccounts":
				args := []string{"install", "renumber", filepath.Join(repo, "charts", "renumber"), "-n", ns, "--create-namespace"}
				if install != "helm" {
					args = append(args, "--set", "agent.serviceAccount.name=home-agent", "--set", "writer.serviceAccount.name=home-writer")
				}
				for _, s := range world.LocalImages {
					args = append(args, "--set", s)
				}
				if out, err := helmIn(t, w, args...); err != nil {
					t.Fatalf("helm install -n %s: %v\n%s", ns, err, out)
				}
			}
			agent, writer := "renumber-agent", "renumber-writer"
			if install == "helm with its own ServiceAccounts" {
				agent, writer = "home-agent", "home-writer"
			}
			agentPolicyHolds(t, w, ns, agent)
			writerPolicyHolds(t, w, ns, writer)
		})
	}
}
