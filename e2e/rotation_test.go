package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/tools/world"
)

// TestRotations renumbers again and again with maxPrefixHistory 2 and every
// backend at once (a Cilium pool and CIDR group, a MetalLB IPAddressPool,
// kube-vip's ConfigMap, a Calico IPPool with its siblings, HA Services on
// Cilium and on kube-vip): which entries exist when, a prefix coming back, and
// twenty rotations that leave every user entry in place with no growth.
func TestRotations(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	installBackends(t, w)
	p := func(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x:100::/64", i)) }
	advertise := func(cur int, old ...int) {
		t.Helper()
		ads := []world.Advert{{Prefix: p(cur), Valid: 600 * time.Second, Preferred: 300 * time.Second}}
		for _, o := range old {
			ads = append(ads, world.Advert{Prefix: p(o), Valid: 600 * time.Second, Preferred: 0})
		}
		if err := w.Net.Router.Advertise(ctx, ads...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: p(1), Valid: 600 * time.Second, Preferred: 300 * time.Second}); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{
		"transition": map[string]any{"mode": "ha", "maxPrefixHistory": 2},
	})
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}},
	})
	apply(t, w, groupGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "raw", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"externalCIDRs": []any{"198.51.100.0/24"}},
	})
	for gvr, obj := range map[schema.GroupVersionResource]map[string]any{
		addressPoolGVR: {"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
			"metadata": map[string]any{"name": "home", "namespace": "metallb-system", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
			"spec":     map[string]any{"addresses": []any{"192.0.2.10-192.0.2.20"}}},
		ippoolGVR: {"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": "home-v6", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
			"spec":     map[string]any{"cidr": "2001:db8:ffff::/64", "blockSize": 122}},
		{Version: "v1", Resource: "configmaps"}: {"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "kubevip", "namespace": "kube-system", "annotations": map[string]any{
				"dynamic-prefix.io/name": "home", backends.AnnotationKubeVIPKey: "cidr-global"}},
			"data": map[string]any{"cidr-global": "192.0.2.128/28", "range-default": "192.0.2.200-192.0.2.210"}},
	} {
		u := &unstructured.Unstructured{Object: obj}
		if _, err := w.API.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createService(t, w, "web", map[string]string{
		"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::1:2:3:4",
		holdings.AnnotationIPs: "192.0.2.7", holdings.AnnotationTarget: "web.example.org"})
	createService(t, w, "vip", map[string]string{
		"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::1:2:3:5", holdings.AnnotationProvider: "kube-vip",
		holdings.AnnotationKubeVIPIPs: "192.0.2.8", holdings.AnnotationSkipDNS: "true"})
	// Twenty-five renumberings in about a minute are beyond the agent's write
	// budget too (10 at once, then 12 a minute).
	startAgent(t, w, "node1", "--publish-per-minute", "600")
	// Twenty-five renumberings in about a minute (some 11 writes each) are far
	// beyond the default write budget (burst 5, then 2/min per object; 200,
	// then 60/min in all), which would throttle them.
	startWriter(t, w, "writer-a", "--budget-object-burst", "60", "--budget-object-per-minute", "120",
		"--budget-total-burst", "1000", "--budget-total-per-minute", "1000",
		"--kube-vip-configmap", backends.DefaultKubeVIPConfigMap)

	addr := func(i int, host string) string {
		a, _ := model.Splice(p(i), netip.MustParseAddr(host))
		return a.String()
	}
	// holds lists what every backend should hold: the user's entries first,
	// then ours for the pooled prefixes (current first).
	holds := func(pooled []int) map[string]string {
		var prefixes, web, vip []string
		ippools := map[string]string{"home-v6": p(pooled[0]).String()}
		for n, i := range pooled {
			prefixes = append(prefixes, p(i).String())
			web, vip = append(web, addr(i, "::1:2:3:4")), append(vip, addr(i, "::1:2:3:5"))
			if n > 0 {
				ippools[backends.CalicoSiblingName("home-v6", p(i).String())] = p(i).String()
			}
		}
		join := func(user string, ours []string) string { return strings.Join(append([]string{user}, ours...), ",") }
		return map[string]string{
			"cilium pool": join("192.0.2.0/24", prefixes), "CIDR group": join("198.51.100.0/24", prefixes),
			"metallb":  join("192.0.2.10-192.0.2.20", prefixes),
			"kube-vip": join("192.0.2.128/28", prefixes) + " / range-default 192.0.2.200-192.0.2.210",
			"calico":   fmt.Sprint(ippools),
			"web ips":  join("192.0.2.7", web), "web dns": join("web.example.org", web[:1]),
			"vip ips": join("192.0.2.8", vip) + " / cilium ",
		}
	}
	held := func() map[string]string {
		svc := func(name string) map[string]string {
			s, err := w.API.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return s.Annotations
		}
		pool, err := w.API.Dynamic.Resource(addressPoolGVR).Namespace("metallb-system").Get(ctx, "home", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		metallb, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "addresses")
		cm, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubevip", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pools := map[string]string{}
		for name, cidr := range ippools(t, w) {
			pools[name] = strings.TrimSuffix(cidr, ", disabled")
		}
		web, vip := svc("web"), svc("vip")
		return map[string]string{
			"cilium pool": strings.Join(blocks(t, w, "lb"), ","), "CIDR group": strings.Join(cidrs(t, w, "raw"), ","),
			"metallb":  strings.Join(metallb, ","),
			"kube-vip": cm.Data["cidr-global"] + " / range-default " + cm.Data["range-default"],
			"calico":   fmt.Sprint(pools),
			"web ips":  web[holdings.AnnotationIPs], "web dns": web[holdings.AnnotationTarget],
			"vip ips": vip[holdings.AnnotationKubeVIPIPs] + " / cilium " + vip[holdings.AnnotationIPs],
		}
	}
	expect := func(what string, pooled ...int) {
		t.Helper()
		want := holds(pooled)
		eventually(t, what, func() (bool, string) {
			got := held()
			for k, v := range want {
				if got[k] != v {
					return false, fmt.Sprintf("%s: %q, want %q", k, got[k], v)
				}
			}
			return true, ""
		})
	}
	// recent lists prefixes by when they were last current: the pools hold the
	// current one and the maxPrefixHistory (2) most recent others.
	var recent []int
	become := func(cur int, what string) {
		t.Helper()
		recent = append([]int{cur}, slices.DeleteFunc(recent, func(i int) bool { return i == cur })...)
		advertise(cur, recent[1:min(len(recent), 3)]...)
		expect(what, recent[:min(len(recent), 3)]...)
	}
	become(1, "A only")
	become(2, "B, A draining")
	become(3, "C, B, A draining")
	become(4, "D; maxPrefixHistory 2 drops A though still valid")
	become(3, "C comes back: reactivated, not duplicated")
	for i := 5; i < 25; i++ {
		become(i, fmt.Sprintf("rotation to %d", i))
	}
	settleWrites()
	m := mark(t, w)
	time.Sleep(60 * time.Second)
	ws, err := w.API.WritesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, wr := range ws {
		if wr.Resource != "leases" {
			t.Errorf("write after the rotations settled: %s", wr)
		}
	}
}
