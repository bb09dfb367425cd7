package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
)

// TestAStolenWriterTokensOwnObjectsAndStatusMoveNoAddress (issue 42 items
// 8-9 revisited) plays the stolen writer token with the requests
// TestAStolenWriterTokenMovesNoAddress never makes: creating objects (the
// writer creates Calico IPPools and CiliumBGPAdvertisements of its own),
// relabelling its own objects, and writing the DynamicPrefix status the
// value policy trusts. Each case is a request the shipped policies should
// refuse; a control beside each shows the policy is loaded and refuses the
// plain form of the same write.
//
// home (stealWriterToken): current 2001:db8:1::/64, draining
// 2001:db8:2::/64, expired 2001:db8:3::/64; the admin has since narrowed
// allowedPrefixes to the two live prefixes.
func TestAStolenWriterTokensOwnObjectsAndStatusMoveNoAddress(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0"},
		"prefixFilter":        map[string]any{"allowedPrefixes": []any{"2001:db8:1::/64", "2001:db8:2::/64"}}},
		"subnets": []any{map[string]any{"name": "public", "offset": 1, "prefixLength": 120, "bgp": map[string]any{"advertise": true, "community": "65000:100"}}}})
	if err := s.w.API.InstallCalico(s.ctx); err != nil {
		t.Fatal(err)
	}
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home"})

	create := func(gvr schema.GroupVersionResource, obj map[string]any) error {
		_, err := s.writer.Resource(gvr).Create(s.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		return err
	}
	// The user's pool that follows home, whose draining prefixes the writer
	// puts in disabled siblings named after it, labelled sibling-of it and
	// owned by it (backends.RenderCalico).
	apply(t, s.w, ippoolGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "home-v6", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"cidr": "2001:db8:1::/64"}})
	parent := s.read(t, ippoolGVR, "", "home-v6")
	// ippool is a pool of the writer's own; sibling gives it the shape the
	// writer's siblings have.
	ippool := func(name, follows, cidr string) map[string]any {
		return map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": name, "labels": map[string]any{
				"app.kubernetes.io/managed-by": "renumber", "dynamic-prefix.io/name": follows}},
			"spec": map[string]any{"cidr": cidr, "disabled": true}}
	}
	sibling := func(follows, cidr string) map[string]any {
		p := ippool("home-v6-"+strings.NewReplacer(":", "-", "/", "-").Replace(cidr), follows, cidr)
		meta := p["metadata"].(map[string]any)
		meta["labels"].(map[string]any)["dynamic-prefix.io/sibling-of"] = "home-v6"
		meta["ownerReferences"] = []any{map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"name": "home-v6", "uid": string(parent.GetUID())}}
		return p
	}

	// Control: its own IPPool following home, with a CIDR outside home's
	// prefixes, is refused (the value policy reads IPPools)...
	if err := create(ippoolGVR, sibling("home", "2001:db8:bad::/64")); !denied(err) {
		t.Fatalf("control: an IPPool of its own following home with an outside CIDR: %s", errString(err))
	}
	// ... but the writer names the DynamicPrefix its own objects follow, and
	// one that does not exist is nobody's param: any CIDR passes the value
	// policy. Outside the sibling's shape it is refused ...
	if err := create(ippoolGVR, ippool("ghost", "no-such-prefix", "2001:db8:bad::/64")); !denied(err) {
		t.Errorf("an IPPool of its own labelled with a DynamicPrefix that does not exist, holding 2001:db8:bad::/64: %s", errString(err))
	}
	for name, change := range map[string]func(meta, spec map[string]any){
		"enabled":                    func(_, spec map[string]any) { spec["disabled"] = false },
		"without the pool it copies": func(meta, _ map[string]any) { delete(meta["labels"].(map[string]any), "dynamic-prefix.io/sibling-of") },
		"owned by nobody":            func(meta, _ map[string]any) { delete(meta, "ownerReferences") },
		"labelled as the existing operator's too": func(meta, _ map[string]any) {
			meta["labels"].(map[string]any)["dynamic-prefix.io/parent-pool"] = "home-v6"
		},
	} {
		obj := sibling("home", "2001:db8:2::/64")
		meta, spec := obj["metadata"].(map[string]any), obj["spec"].(map[string]any)
		meta["name"] = "home-v6-" + strings.ReplaceAll(name, " ", "-")
		change(meta, spec)
		if err := create(ippoolGVR, obj); !denied(err) {
			t.Errorf("an IPPool of its own in home's prefixes, %s: %s", name, errString(err))
		}
	}
	// ... and in it, disabled (no address is allocated from it), it can
	// never be enabled: that no admission policy can ask whether a
	// DynamicPrefix exists is all it is left.
	if err := create(ippoolGVR, sibling("no-such-prefix", "2001:db8:bad::/64")); err != nil {
		t.Logf("a disabled sibling of home-v6 naming a DynamicPrefix that does not exist: %v", err)
	} else if err := s.patch(ippoolGVR, "", "home-v6-2001-db8-bad---64", `{"spec":{"disabled":false}}`); !denied(err) {
		t.Errorf("a sibling naming a DynamicPrefix that does not exist, enabled: %s", errString(err))
	}
	// Its honest sibling, then the same object relabelled away from home in
	// the write that gives it an outside CIDR and enables it.
	if err := create(ippoolGVR, sibling("home", "2001:db8:2::/64")); err != nil {
		t.Fatalf("an honest sibling refused: %v", err)
	}
	const honest = "home-v6-2001-db8-2---64"
	if err := s.patch(ippoolGVR, "", honest, `{"spec":{"cidr":"2001:db8:bad::/64"}}`); !denied(err) {
		t.Fatalf("control: its sibling given an outside CIDR: %s", errString(err))
	}
	for name, patch := range map[string]string{
		"relabelled away from home, given 2001:db8:bad::/64 and enabled": `{"metadata":{"labels":{"dynamic-prefix.io/name":"no-such-prefix"}},"spec":{"cidr":"2001:db8:bad::/64","disabled":false}}`,
		"relabelled away from home":                                      `{"metadata":{"labels":{"dynamic-prefix.io/name":"no-such-prefix"}}}`,
		"enabled":                                                        `{"spec":{"disabled":false}}`,
		"given another owner":                                            `{"metadata":{"ownerReferences":[]}}`,
	} {
		if err := s.patch(ippoolGVR, "", honest, patch); !denied(err) {
			t.Errorf("its sibling %s: %s", name, errString(err))
		}
	}
	// Its settings are its pool's (TestAStolenWriterTokenGivesItsObjectsOnlyTheWritersValues).
	if err := s.patch(ippoolGVR, "", honest, `{"spec":{"natOutgoing":true}}`); !denied(err) {
		t.Errorf("its sibling given natOutgoing, which its pool does not have: %s", errString(err))
	}

	// A BGP advertisement of its own: the writer only ever advertises the
	// LoadBalancer IPs of the Services a following pool selects. This one
	// advertises every Service's ClusterIP, external and LoadBalancer IPs
	// (a selector matching everything) and every pod CIDR, to whatever peer
	// selects advertise=bgp.
	advert := map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
		"metadata": map[string]any{"name": "home-everything", "labels": map[string]any{
			"app.kubernetes.io/managed-by": "renumber", "dynamic-prefix.io/name": "home", "advertise": "bgp"}},
		"spec": map[string]any{"advertisements": []any{
			map[string]any{"advertisementType": "Service",
				"service":  map[string]any{"addresses": []any{"ClusterIP", "ExternalIP", "LoadBalancerIP"}},
				"selector": map[string]any{"matchExpressions": []any{map[string]any{"key": "x", "operator": "NotIn", "values": []any{"y"}}}}},
			map[string]any{"advertisementType": "PodCIDR"}}}}
	if err := create(advertGVR, advert); !denied(err) {
		t.Errorf("a BGP advertisement of its own announcing every Service's ClusterIP/ExternalIP/LoadBalancerIP and the pod CIDRs: %s", errString(err))
	}
	// The writer's own shape (backends.RenderAdvertisement) passes; each
	// step away from it, and the existing operator's advertisement given
	// any other spec, does not.
	home := s.read(t, api.GVR, "", "home")
	shaped := func(name string, spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
			"metadata": map[string]any{"name": name, "labels": map[string]any{
				"app.kubernetes.io/managed-by": "renumber", "dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "public", "advertise": "bgp"},
				"ownerReferences": []any{map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix", "name": "home", "uid": string(home.GetUID())}}},
			"spec": spec}
	}
	writers := map[string]any{"advertisements": []any{map[string]any{"advertisementType": "Service",
		"service":    map[string]any{"addresses": []any{"LoadBalancerIP"}},
		"selector":   map[string]any{"matchLabels": map[string]any{"app": "web"}},
		"attributes": map[string]any{"communities": map[string]any{"standard": []any{"65000:100"}}}}}}
	apply(t, s.w, advertGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
		"metadata": map[string]any{"name": "dp-home-public", "labels": map[string]any{
			"app.kubernetes.io/managed-by": "dynamic-prefix-operator", "dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "public"}},
		"spec": map[string]any{"advertisements": []any{map[string]any{"advertisementType": "Service",
			"service": map[string]any{"addresses": []any{"LoadBalancerIP"}}}}}})
	if err := create(advertGVR, shaped("home-public", writers)); err != nil {
		t.Errorf("a BGP advertisement of its own in the writer's shape: %v", err)
	}
	for name, spec := range map[string]string{
		"the pod CIDRs":          `{"advertisements":[{"advertisementType":"PodCIDR"}]}`,
		"ClusterIPs":             `{"advertisements":[{"advertisementType":"Service","service":{"addresses":["ClusterIP"]}}]}`,
		"a second advertisement": `{"advertisements":[{"advertisementType":"Service","service":{"addresses":["LoadBalancerIP"]}},{"advertisementType":"Service","service":{"addresses":["LoadBalancerIP"]}}]}`,
		"a local preference":     `{"advertisements":[{"advertisementType":"Service","service":{"addresses":["LoadBalancerIP"]},"attributes":{"localPreference":200}}]}`,
		"two communities":        `{"advertisements":[{"advertisementType":"Service","service":{"addresses":["LoadBalancerIP"]},"attributes":{"communities":{"standard":["65000:1","65000:2"]}}}]}`,
	} {
		var v map[string]any
		if err := json.Unmarshal([]byte(spec), &v); err != nil {
			t.Fatal(err)
		}
		if err := create(advertGVR, shaped("home-"+strings.ReplaceAll(name, " ", "-"), v)); !denied(err) {
			t.Errorf("a BGP advertisement of its own announcing %s: %s", name, errString(err))
		}
		if err := s.patch(advertGVR, "", "dp-home-public", `{"spec":`+spec+`}`); !denied(err) {
			t.Errorf("the existing operator's BGP advertisement made to announce %s: %s", name, errString(err))
		}
	}
	ghost := shaped("ghost-public", writers)
	ghost["metadata"].(map[string]any)["labels"].(map[string]any)["dynamic-prefix.io/name"] = "no-such-prefix"
	if err := create(advertGVR, ghost); !denied(err) {
		t.Errorf("a BGP advertisement of its own naming a DynamicPrefix other than its owner: %s", errString(err))
	}
	if err := s.patch(advertGVR, "", "home-public", `{"metadata":{"labels":{"dynamic-prefix.io/name":"other"}}}`); !denied(err) {
		t.Errorf("its BGP advertisement relabelled: %s", errString(err))
	}
	if err := s.patch(advertGVR, "", "dp-home-public", `{"spec":`+jsonOf(t, writers)+`}`); err != nil {
		t.Errorf("the existing operator's BGP advertisement given the writer's spec (adopted): %v", err)
	}

	// The status, the value policy's only memory. Control: a prefix the
	// filter refuses cannot be named...
	if err := s.patch(api.GVR, "", "home", `{"status":{"history":[`+
		`{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"draining"},`+
		`{"prefix":"2001:db8:4::/64","state":"draining"}]}}`, "status"); !denied(err) {
		t.Fatalf("control: a prefix outside allowedPrefixes named in the history: %s", errString(err))
	}
	// ... but the expired one, which the filter no longer accepts either,
	// comes back to life as draining (it is "already named").
	if err := s.patch(api.GVR, "", "home", `{"status":{"history":[`+
		`{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"draining"},`+
		`{"prefix":"2001:db8:3::/64","state":"draining","expiresAt":"9999-12-31T00:00:00Z"}]}}`, "status"); !denied(err) {
		t.Errorf("the expired 2001:db8:3::/64, outside allowedPrefixes, named draining again until 9999: %s", errString(err))
	}
	// Whatever the status now says, an address in the expired prefix (the
	// policy reads its params from an informer: give it 10 s to see the
	// status, as stealWriterToken gives its probe).
	var err error
	for range 100 {
		if err = s.annotate("default", "web", map[string]any{"lbipam.cilium.io/ips": "2001:db8:3::1"}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := s.read(t, serviceGVR, "default", "web").GetAnnotations()["lbipam.cilium.io/ips"]; got == "2001:db8:3::1" {
		t.Errorf("the Service following home got 2001:db8:3::1, in a prefix the status had expired and the filter refuses")
	} else {
		t.Logf("2001:db8:3::1 refused: %s", errString(err))
	}
	// Nor does any other step the writer never takes: a drain extended, an
	// expired prefix made current, a second active entry, the current one
	// draining, an entry never named appearing as expired.
	for name, history := range map[string]string{
		"2001:db8:2::/64's drain given a deadline of 9999 (it had none)": `{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"draining","expiresAt":"9999-12-31T00:00:00Z"},{"prefix":"2001:db8:3::/64","state":"expired"}`,
		"the expired 2001:db8:3::/64 made active":                        `{"prefix":"2001:db8:3::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"draining"}`,
		"2001:db8:2::/64 active beside the current prefix":               `{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"active"}`,
		"the current 2001:db8:1::/64 named draining":                     `{"prefix":"2001:db8:1::/64","state":"draining","expiresAt":"9999-12-31T00:00:00Z"},{"prefix":"2001:db8:2::/64","state":"draining"}`,
		"a prefix never named, expired":                                  `{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"draining"},{"prefix":"2001:db8:9::/64","state":"expired"}`,
		"2001:db8:2::/64's state dropped (never expires)":                `{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64"}`,
		"an entry without a prefix":                                      `{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"draining"},{"state":"expired"}`,
	} {
		if err := s.patch(api.GVR, "", "home", `{"status":{"history":[`+history+`]}}`, "status"); !denied(err) {
			t.Errorf("the status with %s: %s", name, errString(err))
		}
	}
	if err := s.patch(api.GVR, "", "home", `{"status":{"currentPrefix":"2001:db8:3::/64","history":[{"prefix":"2001:db8:3::/64","state":"active"},`+
		`{"prefix":"2001:db8:1::/64","state":"draining","expiresAt":"2030-01-01T00:00:00Z"}]}}`, "status"); !denied(err) {
		t.Errorf("the expired 2001:db8:3::/64, outside allowedPrefixes, made current: %s", errString(err))
	}
	// A drain with a deadline: it may come closer, never go further.
	drain := func(deadline string) string {
		return `{"status":{"currentPrefix":"2001:db8:1::/64","history":[{"prefix":"2001:db8:1::/64","state":"active"},` +
			`{"prefix":"2001:db8:2::/64","state":"draining","deprecatedAt":"2029-01-01T00:00:00Z","expiresAt":"` + deadline + `"}]}}`
	}
	if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(s.ctx, "home", types.MergePatchType, []byte(drain("2030-01-01T00:00:00Z")), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := s.patch(api.GVR, "", "home", drain("2030-01-01T00:00:01Z"), "status"); !denied(err) {
		t.Errorf("a drain's deadline a second later: %s", errString(err))
	}
	if err := s.patch(api.GVR, "", "home", `{"status":{"history":[{"prefix":"2001:db8:1::/64","state":"active"},`+
		`{"prefix":"2001:db8:2::/64","state":"draining","deprecatedAt":"2029-01-01T00:00:01Z","expiresAt":"2030-01-01T00:00:00Z"}]}}`, "status"); !denied(err) {
		t.Errorf("a drain deprecated a second later: %s", errString(err))
	}
	// Nor earlier: decide bounds a drain by its deprecatedAt, and an
	// earlier one would cut an honest drain short.
	if err := s.patch(api.GVR, "", "home", `{"status":{"history":[{"prefix":"2001:db8:1::/64","state":"active"},`+
		`{"prefix":"2001:db8:2::/64","state":"draining","deprecatedAt":"2028-12-31T23:59:59Z","expiresAt":"2030-01-01T00:00:00Z"}]}}`, "status"); !denied(err) {
		t.Errorf("a drain deprecated a second earlier: %s", errString(err))
	}
	if err := s.patch(api.GVR, "", "home", drain("2030-01-01T00:00:00Z"), "status"); err != nil {
		t.Errorf("a drain's deadline as it was: %v", err)
	}
	if err := s.patch(api.GVR, "", "home", drain("2029-06-01T00:00:00Z"), "status"); err != nil {
		t.Errorf("a drain's deadline brought closer: %v", err)
	}
	// At the bound (16 entries, renumber-writer-sizes), each checked against
	// each old one with its timestamps, the policy that fails closed stays
	// inside its cost: the writer's own write, the status as it was, passes
	// (each prefix in the writer's text: 2001:db8:2::/64, not 2001:db8:2:0::/64).
	entries := []string{`{"prefix":"2001:db8:1::/64","state":"active"}`}
	for i := range 15 {
		p := netip.MustParsePrefix(fmt.Sprintf("2001:db8:2:%x::/64", i))
		entries = append(entries, fmt.Sprintf(`{"prefix":"%s","state":"draining","deprecatedAt":"2029-01-01T00:00:00Z","expiresAt":"2030-01-01T00:00:%02dZ"}`, p, i))
	}
	full := `{"status":{"currentPrefix":"2001:db8:1::/64","history":[` + strings.Join(entries, ",") + `]}}`
	if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(s.ctx, "home", types.MergePatchType, []byte(full), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := s.patch(api.GVR, "", "home", full, "status"); err != nil {
		t.Errorf("the status as it was, at 16 entries: %v", err)
	}
}
