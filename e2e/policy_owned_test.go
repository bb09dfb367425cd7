package e2e

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/api"
)

// TestAStolenWriterTokenPlaysWhatTheGeneratorLeavesOut (red team, issue 42
// items 8-9 revisited) plays the stolen writer token with the requests
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
func TestAStolenWriterTokenPlaysWhatTheGeneratorLeavesOut(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0"},
		"prefixFilter":        map[string]any{"allowedPrefixes": []any{"2001:db8:1::/64", "2001:db8:2::/64"}}}})
	if err := s.w.API.InstallCalico(s.ctx); err != nil {
		t.Fatal(err)
	}
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home"})

	create := func(gvr schema.GroupVersionResource, obj map[string]any) error {
		_, err := s.writer.Resource(gvr).Create(s.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		return err
	}
	ippool := func(name, follows, cidr string) map[string]any {
		return map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": name, "labels": map[string]any{
				"app.kubernetes.io/managed-by": "renumber", "dynamic-prefix.io/name": follows}},
			"spec": map[string]any{"cidr": cidr, "disabled": true}}
	}

	// Control: its own IPPool following home, with a CIDR outside home's
	// prefixes, is refused (the value policy reads IPPools)...
	if err := create(ippoolGVR, ippool("control", "home", "2001:db8:bad::/64")); !denied(err) {
		t.Fatalf("control: an IPPool of its own following home with an outside CIDR: %s", errString(err))
	}
	// ... but the writer names the DynamicPrefix its own objects follow, and
	// one that does not exist is nobody's param: any CIDR passes.
	if err := create(ippoolGVR, ippool("ghost", "no-such-prefix", "2001:db8:bad::/64")); !denied(err) {
		t.Errorf("an IPPool of its own labelled with a DynamicPrefix that does not exist, holding 2001:db8:bad::/64: %s", errString(err))
	}
	// Its honest sibling, then the same object relabelled away from home in
	// the write that gives it an outside CIDR and enables it.
	if err := create(ippoolGVR, ippool("home-v6-sibling", "home", "2001:db8:2::/64")); err != nil {
		t.Fatalf("an honest sibling refused: %v", err)
	}
	if err := s.patch(ippoolGVR, "", "home-v6-sibling", `{"spec":{"cidr":"2001:db8:bad::/64","disabled":false}}`); !denied(err) {
		t.Fatalf("control: its sibling given an outside CIDR: %s", errString(err))
	}
	if err := s.patch(ippoolGVR, "", "home-v6-sibling",
		`{"metadata":{"labels":{"dynamic-prefix.io/name":"no-such-prefix"}},"spec":{"cidr":"2001:db8:bad::/64","disabled":false}}`); !denied(err) {
		t.Errorf("its sibling relabelled away from home, given 2001:db8:bad::/64 and enabled: %s", errString(err))
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
}
