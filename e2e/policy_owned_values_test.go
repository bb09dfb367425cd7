package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
)

// TestAStolenWriterTokenGivesItsObjectsOnlyTheWritersValues (issue 42, the
// second red team's reasoned holes) plays the stolen writer token against
// the values of the objects renumber-writer-owned admits: the community of
// a BGP advertisement (BLACKHOLE 65535:666 drops the Services' traffic at
// the router), the settings of a sibling IPPool (natOutgoing, encapsulation,
// BGP export of the pods still on a draining prefix), the CIDR of an IPPool
// that follows nothing - each admitted in the writer's shape before. The
// writer renders a community only from its DynamicPrefix's subnet, a
// sibling's settings only from the pool it copies; beside each refusal the
// writer's own write passes, and a label the writer and the policies never
// read (a policy engine's mutating webhook adds such) passes once the admin
// lists it as the webhook's, and only then; a GitOps tool's never does.
func TestAStolenWriterTokenGivesItsObjectsOnlyTheWritersValues(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"subnets": []any{
		map[string]any{"name": "public", "offset": 1, "prefixLength": 120, "bgp": map[string]any{"advertise": true, "community": "65000:100"}},
		map[string]any{"name": "quiet", "offset": 2, "prefixLength": 120, "bgp": map[string]any{"advertise": true}},
		map[string]any{"name": "inside", "offset": 3, "prefixLength": 120}}})
	if err := s.w.API.InstallCalico(s.ctx); err != nil {
		t.Fatal(err)
	}
	create := func(gvr schema.GroupVersionResource, obj map[string]any) error {
		_, err := s.writer.Resource(gvr).Create(s.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		return err
	}
	home := s.read(t, api.GVR, "", "home")
	// The LB-IPAM pools that use public and quiet: an advertisement's
	// selector is the pool's serviceSelector.
	for _, subnet := range []string{"public", "quiet"} {
		apply(t, s.w, poolGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
			"metadata": map[string]any{"name": subnet, "annotations": map[string]any{"dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": subnet}},
			"spec":     map[string]any{"serviceSelector": map[string]any{"matchLabels": map[string]any{"expose": subnet}}}})
	}

	// BGP advertisements: the writer's own for subnet public carries
	// 65000:100, public's community; quiet's none; inside advertises nothing.
	advert := func(name, subnet string, extra map[string]any, community ...any) map[string]any {
		labels := map[string]any{"app.kubernetes.io/managed-by": "renumber", "dynamic-prefix.io/name": "home",
			"dynamic-prefix.io/subnet": subnet, "advertise": "bgp"}
		for k, v := range extra {
			labels[k] = v
		}
		a := map[string]any{"advertisementType": "Service", "service": map[string]any{"addresses": []any{"LoadBalancerIP"}},
			"selector": map[string]any{"matchLabels": map[string]any{"expose": subnet}}}
		if len(community) > 0 {
			a["attributes"] = map[string]any{"communities": map[string]any{"standard": community}}
		}
		return map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
			"metadata": map[string]any{"name": name, "labels": labels,
				"ownerReferences": []any{map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix", "name": "home", "uid": string(home.GetUID())}}},
			"spec": map[string]any{"advertisements": []any{a}}}
	}
	// The policy that reads the DynamicPrefix reads it from an informer:
	// the first refusal waits for it.
	if err := refusedSoon(s, advertGVR, advert("home-public-blackhole", "public", nil, "65535:666")); !denied(err) {
		t.Errorf("a BGP advertisement of its own, public's with BLACKHOLE (65535:666): %s", errString(err))
	}
	for name, obj := range map[string]map[string]any{
		"public's with NO_EXPORT (65535:65281)":            advert("home-public-noexport", "public", nil, "65535:65281"),
		"public's with NO_EXPORT as one number":            advert("home-public-decimal", "public", nil, "4294967041"),
		"public's with an ISP's blackhole (65000:666)":     advert("home-public-isp", "public", nil, "65000:666"),
		"public's without public's community":              advert("home-public-bare", "public", nil),
		"quiet's, which names no community, with one":      advert("home-quiet-community", "quiet", nil, "65000:100"),
		"for inside, which home does not advertise":        advert("home-inside", "inside", nil),
		"for a subnet home does not have":                  advert("home-nosuch", "nosuch", nil),
		"public's labelled advertise: isp2 (another peer)": advert("home-public-isp2", "public", map[string]any{"advertise": "isp2"}, "65000:100"),
	} {
		if err := create(advertGVR, obj); !denied(err) {
			t.Errorf("a BGP advertisement of its own, %s: %s", name, errString(err))
		}
	}
	// The Services it announces are those public's pool picks: not every
	// Service, not quiet's, and not none (the writer leaves the selector
	// out only for a pool without one).
	for name, selector := range map[string]any{
		"every Service":                   map[string]any{"matchExpressions": []any{map[string]any{"key": "expose", "operator": "NotIn", "values": []any{"never"}}}},
		"a selector matching all":         map[string]any{},
		"the Services quiet's pool picks": map[string]any{"matchLabels": map[string]any{"expose": "quiet"}},
		"no selector":                     nil,
	} {
		obj := advert("home-public-"+strings.ToLower(strings.NewReplacer(" ", "-", "'", "").Replace(name)), "public", nil, "65000:100")
		a := obj["spec"].(map[string]any)["advertisements"].([]any)[0].(map[string]any)
		if selector == nil {
			delete(a, "selector")
		} else {
			a["selector"] = selector
		}
		if err := refusedSoon(s, advertGVR, obj); !denied(err) {
			t.Errorf("a BGP advertisement of its own for public announcing %s: %s", name, errString(err))
		}
	}
	if err := create(advertGVR, advert("home-public", "public", nil, "65000:100")); err != nil {
		t.Errorf("the writer's advertisement for public (65000:100): %v", err)
	}
	if err := create(advertGVR, advert("home-quiet", "quiet", nil)); err != nil {
		t.Errorf("the writer's advertisement for quiet (no community): %v", err)
	}
	// The existing operator's advertisement for public, adopted: the
	// writer's spec for it, nothing else.
	apply(t, s.w, advertGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
		"metadata": map[string]any{"name": "dp-home-public", "labels": map[string]any{
			"app.kubernetes.io/managed-by": "dynamic-prefix-operator", "dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "public"}},
		"spec": map[string]any{"advertisements": []any{map[string]any{"advertisementType": "Service",
			"service": map[string]any{"addresses": []any{"LoadBalancerIP"}}}}}})
	if err := s.patch(advertGVR, "", "dp-home-public", `{"spec":`+jsonOf(t, advert("", "public", nil, "65535:666")["spec"])+`}`); !denied(err) {
		t.Errorf("the existing operator's advertisement for public given BLACKHOLE: %s", errString(err))
	}
	if err := s.patch(advertGVR, "", "dp-home-public", `{"spec":`+jsonOf(t, advert("", "public", nil, "65000:100")["spec"])+`}`); err != nil {
		t.Errorf("the existing operator's advertisement for public given the writer's spec (adopted): %v", err)
	}
	// Its own advertisement: a label a policy engine adds passes; the
	// labels the writer, the policies and a peer config read stay.
	webhookLabelsPass(t, s, advertGVR, advert("home-public-tagged", "public", map[string]any{webhookLabel: "net"}, "65000:100"), "home-public",
		map[string]string{"another subnet": `"dynamic-prefix.io/subnet":"quiet"`, "advertise: isp2": `"advertise":"isp2"`})

	// Calico IPPools. The user's pool that follows home (VXLAN, BGP export
	// on, natOutgoing off), one that follows nothing, and the existing
	// operator's sibling of it.
	apply(t, s.w, ippoolGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "home-v6", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"cidr": "2001:db8:1::/64", "vxlanMode": "Always", "blockSize": int64(122), "allowedUses": []any{"Workload"}}})
	apply(t, s.w, ippoolGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "default-ipv6-ippool"},
		"spec":     map[string]any{"cidr": "fd00:10::/64", "natOutgoing": true}})
	apply(t, s.w, ippoolGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "home-v6-operator", "labels": map[string]any{
			"app.kubernetes.io/managed-by": "dynamic-prefix-operator", "dynamic-prefix.io/parent-pool": "home-v6", "dynamic-prefix.io/name": "home"}},
		"spec": map[string]any{"cidr": "2001:db8:2::/64", "vxlanMode": "Always", "disabled": true}})
	parent := s.read(t, ippoolGVR, "", "home-v6")
	sibling := func(name, cidr string, extra map[string]any) map[string]any {
		labels := map[string]any{"app.kubernetes.io/managed-by": "renumber", "dynamic-prefix.io/name": "home", "dynamic-prefix.io/sibling-of": "home-v6"}
		for k, v := range extra {
			labels[k] = v
		}
		return map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": name, "labels": labels, "ownerReferences": []any{map[string]any{
				"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool", "name": "home-v6", "uid": string(parent.GetUID())}}},
			"spec": map[string]any{"cidr": cidr, "disabled": true, "vxlanMode": "Always", "blockSize": int64(122), "allowedUses": []any{"Workload"}}}
	}
	// A sibling is the pool it copies, with its own CIDR, disabled
	// (backends.RenderCalico): created otherwise, it is refused ...
	nat := sibling("home-v6-2001-db8-2-1---80", "2001:db8:2:0:1::/80", nil)
	nat["spec"].(map[string]any)["natOutgoing"] = true
	if err := refusedSoon(s, ippoolGVR, nat); !denied(err) {
		t.Errorf("a sibling of its own with natOutgoing, which home-v6 does not have: %s", errString(err))
	}
	const honest = "home-v6-2001-db8-2---64"
	if err := create(ippoolGVR, sibling(honest, "2001:db8:2::/64", nil)); err != nil {
		t.Fatalf("the writer's sibling of home-v6: %v", err)
	}
	settings := map[string]string{
		"natOutgoing":          `{"natOutgoing":true}`,
		"IPIP":                 `{"ipipMode":"Always"}`,
		"IPIP, the old field":  `{"ipip":{"enabled":true,"mode":"always"}}`,
		"no VXLAN":             `{"vxlanMode":"Never"}`,
		"BGP export off":       `{"disableBGPExport":true}`,
		"another nodeSelector": `{"nodeSelector":"!all()"}`,
		"another blockSize":    `{"blockSize":126}`,
		"other uses":           `{"allowedUses":["Tunnel"]}`,
	}
	for name, spec := range settings {
		if err := s.patch(ippoolGVR, "", honest, `{"spec":`+spec+`}`); !denied(err) {
			t.Errorf("its sibling given %s, which home-v6 does not have: %s", name, errString(err))
		}
	}
	// Labels: one a mutating webhook adds passes, at creation and on an
	// update; the ones the writer and the policies read stay.
	webhookLabelsPass(t, s, ippoolGVR, sibling("home-v6-2001-db8-2-2---80", "2001:db8:2:0:2::/80", map[string]any{webhookLabel: "net"}), honest,
		map[string]string{"the sibling of another": `"dynamic-prefix.io/sibling-of":"default-ipv6-ippool"`,
			"the existing operator's": `"dynamic-prefix.io/parent-pool":"home-v6"`})
	if err := create(ippoolGVR, sibling("home-v6-2001-db8-2-3---80", "2001:db8:2:0:3::/80", map[string]any{"dynamic-prefix.io/parent-pool": "home-v6"})); !denied(err) {
		t.Errorf("a sibling of its own labelled as the existing operator's: %s", errString(err))
	}
	// The settings of the pool it copies pass, once the user changed them
	// (the writer follows them).
	if _, err := s.w.API.Dynamic.Resource(ippoolGVR).Patch(s.ctx, "home-v6", types.MergePatchType,
		[]byte(`{"spec":{"natOutgoing":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "its sibling follows home-v6's natOutgoing", func() (bool, string) {
		err := s.patch(ippoolGVR, "", honest, `{"spec":{"natOutgoing":true}}`)
		return err == nil, errString(err)
	})

	// The pools the writer does not own: it moves spec.cidr only on the
	// user's pool that follows a DynamicPrefix, and nothing else there.
	if err := s.patch(ippoolGVR, "", "home-v6", `{"spec":{"cidr":"2001:db8:2::/64"}}`); err != nil {
		t.Errorf("home-v6 given home's draining prefix: %v", err)
	}
	for name, p := range map[string]struct{ pool, patch string }{
		"the pool that follows nothing given another CIDR":   {"default-ipv6-ippool", `{"spec":{"cidr":"2001:db8:1::/64"}}`},
		"the existing operator's sibling given another CIDR": {"home-v6-operator", `{"spec":{"cidr":"2001:db8:1::/64"}}`},
		"the existing operator's sibling given IPIP":         {"home-v6-operator", `{"spec":{"ipip":{"enabled":true}}}`},
		"home-v6 given IPIP (the old field)":                 {"home-v6", `{"spec":{"ipip":{"enabled":true,"mode":"always"}}}`},
	} {
		if err := s.patch(ippoolGVR, "", p.pool, p.patch); !denied(err) {
			t.Errorf("%s: %s", name, errString(err))
		}
	}
}

// refusedSoon creates obj as the writer until a policy that reads its params
// from an informer has seen them (10 s, as stealWriterToken gives its
// probe): the last answer, after deleting what was admitted.
func refusedSoon(s stolen, gvr schema.GroupVersionResource, obj map[string]any) error {
	u := &unstructured.Unstructured{Object: obj}
	var err error
	for range 100 {
		if _, err = s.writer.Resource(gvr).Create(s.ctx, u.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := s.w.API.Dynamic.Resource(gvr).Delete(s.ctx, u.GetName(), metav1.DeleteOptions{}); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// webhookLabel is a label a policy engine's mutating webhook adds.
const webhookLabel = "policy.example.org/team"

// webhookLabelsPass: an object of the writer's own, obj, created with
// webhookLabel, and webhookLabel added to its object name on an update,
// are refused while the admin lists no webhook key - as are a GitOps
// tool's tracking keys, and an annotation - and admitted once webhookLabel
// is listed (neither the writer nor a policy reads it); a GitOps tool's
// keys stay refused, and so do its DynamicPrefix changed, its managed-by
// dropped and each relabel (a label fragment). The list is empty again
// when it returns.
func webhookLabelsPass(t *testing.T, s stolen, gvr schema.GroupVersionResource, obj map[string]any, name string, relabels map[string]string) {
	t.Helper()
	kind := obj["kind"].(string)
	create := func() error {
		_, err := s.writer.Resource(gvr).Create(s.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		return err
	}
	closed := map[string]string{
		"the webhook's label":       `{"metadata":{"labels":{"` + webhookLabel + `":"net"}}}`,
		"an annotation of its own":  `{"metadata":{"annotations":{"policy.example.org/audited":"true"}}}`,
		"a dynamic-prefix.io/ note": `{"metadata":{"annotations":{"dynamic-prefix.io/name":"other"}}}`,
	}
	for what, p := range gitOpsKeys {
		closed[what] = p
	}
	if err := create(); !denied(err) {
		t.Errorf("the writer's %s created with a label no webhook key lists: %s", kind, errString(err))
	}
	for what, p := range closed {
		if err := s.patch(gvr, "", name, p); !denied(err) {
			t.Errorf("its %s given %s, no webhook key listed: %s", kind, what, errString(err))
		}
	}

	listWebhookKeys(t, s.w, webhookLabel)
	eventually(t, "the writer's "+kind+" created with the webhook's label, listed", func() (bool, string) {
		err := create()
		return err == nil, errString(err)
	})
	if err := s.patch(gvr, "", name, `{"metadata":{"labels":{"`+webhookLabel+`":"net"}}}`); err != nil {
		t.Errorf("a label a mutating webhook adds to its %s on update, listed: %v", kind, err)
	}
	relabels["another DynamicPrefix"] = `"dynamic-prefix.io/name":"other"`
	relabels["its managed-by dropped"] = `"app.kubernetes.io/managed-by":null`
	for what, label := range relabels {
		if err := s.patch(gvr, "", name, `{"metadata":{"labels":{`+label+`}}}`); !denied(err) {
			t.Errorf("its %s relabelled to %s: %s", kind, what, errString(err))
		}
	}
	delete(closed, "the webhook's label")
	for what, p := range closed {
		if err := s.patch(gvr, "", name, p); !denied(err) {
			t.Errorf("its %s given %s, the webhook's label listed: %s", kind, what, errString(err))
		}
	}

	listWebhookKeys(t, s.w)
	n := 0
	eventually(t, "the webhook keys unlisted", func() (bool, string) {
		n++
		err := s.patch(gvr, "", name, fmt.Sprintf(`{"metadata":{"labels":{"%s":"%d"}}}`, webhookLabel, n))
		return denied(err), errString(err)
	})
}
