package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

var (
	networkSetGVR       = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "networksets"}
	globalNetworkSetGVR = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "globalnetworksets"}
	networkPolicyGVR    = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
)

// policyPeers renders a NetworkPolicy's rules as "ingress[0]: peer, peer; ..."
// with each peer as its ipBlock ("cidr except e,e") or its kind of selector.
func policyPeers(u *unstructured.Unstructured) string {
	var out []string
	for _, d := range []struct{ rules, peers string }{{"ingress", "from"}, {"egress", "to"}} {
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", d.rules)
		for i, r := range rules {
			var peers []string
			list, _, _ := unstructured.NestedSlice(r.(map[string]any), d.peers)
			for _, p := range list {
				pm := p.(map[string]any)
				if cidr, found, _ := unstructured.NestedString(pm, "ipBlock", "cidr"); found {
					ex, _, _ := unstructured.NestedStringSlice(pm, "ipBlock", "except")
					if len(ex) > 0 {
						cidr += " except " + strings.Join(ex, ",")
					}
					peers = append(peers, cidr)
					continue
				}
				for k := range pm {
					peers = append(peers, k)
				}
			}
			ports, _, _ := unstructured.NestedSlice(r.(map[string]any), "ports")
			out = append(out, fmt.Sprintf("%s[%d]: %s (%d ports)", d.rules, i, strings.Join(peers, ", "), len(ports)))
		}
	}
	return strings.Join(out, "; ")
}

// homeNetworkPolicy is a NetworkPolicy "lan" in default whose ingress rule
// admits the home prefix p (but a /120 of it), the user's IPv4 LAN and web's
// Pods on 443, a second rule any namespace and one host of prefix A (the
// user's: never widened, never moved), and whose egress rule reaches p.
func homeNetworkPolicy(p netip.Prefix) map[string]any {
	return map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "lan", "namespace": "default", "annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec": map[string]any{
			"podSelector": map[string]any{}, "policyTypes": []any{"Ingress", "Egress"},
			"ingress": []any{
				map[string]any{"from": []any{
					map[string]any{"ipBlock": map[string]any{"cidr": p.String(), "except": []any{exceptOf(p)}}},
					map[string]any{"ipBlock": map[string]any{"cidr": "192.168.1.0/24"}},
					map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
				}, "ports": []any{map[string]any{"port": int64(443)}}},
				map[string]any{"from": []any{map[string]any{"namespaceSelector": map[string]any{}},
					map[string]any{"ipBlock": map[string]any{"cidr": onePC}}}},
			},
			"egress": []any{map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": p.String()}}}}},
		},
	}
}

// onePC is the one host homeNetworkPolicy's second rule admits.
const onePC = "2001:db8:1:100::5/128"

// exceptOf is the /120 homeNetworkPolicy excepts from p.
func exceptOf(p netip.Prefix) string { return strings.TrimSuffix(p.String(), "::/64") + "::ff00/120" }

// getIn is get in a namespace ("" for a cluster-wide kind).
func getIn(t *testing.T, w *world.World, gvr schema.GroupVersionResource, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := w.API.Dynamic.Resource(gvr).Namespace(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// nets returns a network set's spec.nets (namespace "" for a global one).
func nets(t *testing.T, w *world.World, gvr schema.GroupVersionResource, namespace, name string) []string {
	t.Helper()
	out, _, _ := unstructured.NestedStringSlice(getIn(t, w, gvr, namespace, name).Object, "spec", "nets")
	return out
}

// allowEvent is one version of a followed object, as a watch delivered it.
type allowEvent struct {
	rv      uint64
	object  string // resource/name
	entries []string
}

// TestAllowListsFollowBeforeAnyPool: a NetworkPolicy and Calico's real
// NetworkSet and GlobalNetworkSet, through three renumberings with
// maxPrefixHistory 2. Each set holds the pooled prefixes (or the subnet it
// names in each) beside the user's nets, which stay; the policy holds them in
// each rule that held the prefix, its except moved along, its other peers,
// rules and ports untouched. One write per object per renumbering; a set
// that follows nothing is never written; and in every version the API server
// stored, in the order it stored them, no pool holds a prefix an allow-list
// does not hold yet, nor one it dropped already. Deleting the DynamicPrefix
// leaves the user's entries only (a policy rule that would be left without
// peers keeps its blocks: an empty rule admits everyone).
func TestAllowListsFollowBeforeAnyPool(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	if err := w.API.InstallCalico(ctx); err != nil {
		t.Fatal(err)
	}
	prefixC, prefixD := netip.MustParsePrefix("2001:db8:3:300::/64"), netip.MustParsePrefix("2001:db8:4:400::/64")
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{
		"subnets":    []any{map[string]any{"name": "svc", "offset": 1, "prefixLength": 112}},
		"transition": map[string]any{"maxPrefixHistory": 2},
	})
	createPool(t, w)
	userLAN := []string{"10.0.0.0/8", "2001:db8:ffff::/64"}
	apply(t, w, networkSetGVR, map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "NetworkSet",
		"metadata": map[string]any{"name": "lan", "namespace": "default", "annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec":     map[string]any{"nets": userLAN},
	})
	apply(t, w, globalNetworkSetGVR, map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "GlobalNetworkSet",
		"metadata": map[string]any{"name": "svc", "annotations": map[string]any{
			dynamicprefix.AnnotationName: "home", dynamicprefix.AnnotationSubnet: "svc"}},
		"spec": map[string]any{"nets": []any{"198.51.100.0/24"}},
	})
	apply(t, w, networkPolicyGVR, homeNetworkPolicy(prefixA))
	apply(t, w, globalNetworkSetGVR, map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "GlobalNetworkSet",
		"metadata": map[string]any{"name": "feed", "labels": map[string]any{"feed": "blocklist"}},
		"spec":     map[string]any{"nets": []any{"203.0.113.0/24", "2001:db8:bad::/48"}},
	})

	// Every version of the three followed objects, from now on.
	var mu sync.Mutex
	var seen []allowEvent
	for _, gvr := range []schema.GroupVersionResource{poolGVR, networkSetGVR, globalNetworkSetGVR, networkPolicyGVR} {
		list, err := w.API.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wi, err := w.API.Dynamic.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(wi.Stop)
		go func() {
			for ev := range wi.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				rv, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
				e := allowEvent{rv: rv, object: gvr.Resource + "/" + u.GetName()}
				switch gvr {
				case poolGVR:
					e.entries = world.Blocks(u)
				case networkPolicyGVR:
					for _, rule := range strings.Split(policyPeers(u), "; ") {
						_, peers, _ := strings.Cut(rule, ": ")
						for _, p := range strings.Split(peers, ", ") {
							if cidr, _, _ := strings.Cut(p, " "); strings.Contains(cidr, "/") && !slices.Contains(e.entries, cidr) {
								e.entries = append(e.entries, cidr)
							}
						}
					}
				default:
					e.entries, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "nets")
				}
				mu.Lock()
				seen = append(seen, e)
				mu.Unlock()
			}
		}()
	}

	start := mark(t, w)
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")
	// pooled is what the status says is pooled: current and draining.
	pooled := func() []string {
		var out []string
		for _, h := range dpStatus(t, w, "home").History {
			if h.State != "expired" {
				out = append(out, h.Prefix)
			}
		}
		return out
	}
	follows := func(current netip.Prefix) []string {
		t.Helper()
		var p []string
		eventually(t, "the sets follow "+current.String(), func() (bool, string) {
			p = pooled()
			if dpStatus(t, w, "home").CurrentPrefix != current.String() || len(p) == 0 || p[0] != current.String() {
				return false, fmt.Sprint("pooled ", p)
			}
			wantLB, wantLAN, wantSvc := []string{"192.0.2.0/24"}, slices.Clone(userLAN), []string{"198.51.100.0/24"}
			in, out := []string{"192.168.1.0/24", "podSelector"}, []string{}
			for _, x := range p {
				wantLB, wantLAN, wantSvc = append(wantLB, x), append(wantLAN, x), append(wantSvc, subnetOf(x))
				in, out = append(in, x+" except "+exceptOf(netip.MustParsePrefix(x))), append(out, x)
			}
			wantNP := fmt.Sprintf("ingress[0]: %s (1 ports); ingress[1]: namespaceSelector, %s (0 ports); egress[0]: %s (0 ports)",
				strings.Join(in, ", "), onePC, strings.Join(out, ", "))
			lb, lan, svc := blocks(t, w, "lb"), nets(t, w, networkSetGVR, "default", "lan"), nets(t, w, globalNetworkSetGVR, "", "svc")
			np := policyPeers(getIn(t, w, networkPolicyGVR, "default", "lan"))
			return slices.Equal(lb, wantLB) && slices.Equal(lan, wantLAN) && slices.Equal(svc, wantSvc) && np == wantNP,
				fmt.Sprintf("pooled %v: lb %v, lan %v, svc %v, policy %s", p, lb, lan, svc, np)
		})
		return p
	}
	follows(prefixA)
	settleWrites()

	steps := []struct{ current, deprecated netip.Prefix }{{prefixB, prefixA}, {prefixC, prefixB}, {prefixD, prefixC}}
	var last []string
	for _, s := range steps {
		m := mark(t, w)
		advertise(t, w, s.current, s.deprecated)
		last = follows(s.current)
		settleWrites()
		want := []string{"patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200",
			"patch globalnetworksets svc 200", "patch networkpolicies lan 200", "patch networksets lan 200"}
		if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
			t.Errorf("renumbering to %s wrote %q, want %q (one write per object)", s.current, got, want)
		}
	}
	if len(last) > 3 || slices.Contains(last, prefixA.String()) {
		t.Errorf("after three renumberings with maxPrefixHistory 2, pooled %v: A's draining should have ended", last)
	}

	// Replay every stored version in the API server's order.
	mu.Lock()
	events := slices.Clone(seen)
	mu.Unlock()
	sort.Slice(events, func(i, j int) bool { return events[i].rv < events[j].rv })
	// Two promises: a prefix is in every allow-list before a pool holds it
	// (never later); an allow-list drops a prefix only when its draining ends,
	// in the pass where the pool drops it too (the pool's next version).
	state := map[string][]string{}
	v6 := func(es []string) []string {
		var out []string
		for _, e := range es {
			if p, err := netip.ParsePrefix(e); err == nil && p.Addr().Is6() && p != netip.MustParsePrefix("2001:db8:ffff::/64") {
				out = append(out, e)
			}
		}
		return out
	}
	allowed := map[string]bool{}   // "lan "+prefix, "svc "+prefix: held by that allow-list at some time
	dropped := map[string]uint64{} // prefix -> the version of an allow-list that dropped it
	for _, e := range events {
		prev := state[e.object]
		state[e.object] = e.entries
		lb, lan, svc, np := state["ciliumloadbalancerippools/lb"], state["networksets/lan"], state["globalnetworksets/svc"], state["networkpolicies/lan"]
		for _, b := range v6(lan) {
			allowed["lan "+b] = true
		}
		for _, b := range v6(np) {
			allowed["np "+b] = true
		}
		for _, b := range v6(svc) {
			allowed["svc "+b] = true
		}
		if e.object != "ciliumloadbalancerippools/lb" {
			for _, b := range v6(prev) {
				if !slices.Contains(e.entries, b) {
					dropped[strings.TrimSuffix(b, "::1:0/112")+"::/64"] = e.rv // svc holds each prefix's subnet
				}
			}
		}
		for _, b := range v6(lb) {
			if !allowed["lan "+b] || !allowed["svc "+subnetOf(b)] || !allowed["np "+b] {
				t.Errorf("at resource version %d the pool held %s before the allow-lists did: lan %v, svc %v, policy %v", e.rv, b, lan, svc, np)
			}
		}
		if e.object == "ciliumloadbalancerippools/lb" {
			for b, rv := range dropped {
				if slices.Contains(e.entries, b) {
					t.Errorf("an allow-list dropped %s at resource version %d, and the pool still held it after (%d)", b, rv, e.rv)
				}
				delete(dropped, b)
			}
		}
		if lan != nil && !(slices.Contains(lan, "10.0.0.0/8") && slices.Contains(lan, "2001:db8:ffff::/64")) ||
			svc != nil && !slices.Contains(svc, "198.51.100.0/24") ||
			np != nil && !(slices.Contains(np, "192.168.1.0/24") && slices.Contains(np, onePC)) {
			t.Errorf("at resource version %d a user's entry was missing: lan %v, svc %v, policy %v", e.rv, lan, svc, np)
		}
	}
	if len(events) < 8 {
		t.Errorf("the watches saw %d versions, want every write's", len(events))
	}

	// Released: the user's nets only, and no record.
	if err := w.API.Dynamic.Resource(api.GVR).Delete(ctx, "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the sets released", func() (bool, string) {
		lan, err := w.API.Dynamic.Resource(networkSetGVR).Namespace("default").Get(ctx, "lan", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		l, _, _ := unstructured.NestedStringSlice(lan.Object, "spec", "nets")
		svc := nets(t, w, globalNetworkSetGVR, "", "svc")
		_, record := lan.GetAnnotations()[dynamicprefix.AnnotationManagedCIDRs]
		return slices.Equal(l, userLAN) && slices.Equal(svc, []string{"198.51.100.0/24"}) && !record,
			fmt.Sprintf("lan %v (record %v), svc %v", l, record, svc)
	})
	// The egress rule keeps its blocks: without them it would admit everyone.
	released := "ingress[0]: 192.168.1.0/24, podSelector (1 ports); ingress[1]: namespaceSelector, " + onePC + " (0 ports); egress[0]: " + strings.Join(last, ", ") + " (0 ports)"
	eventually(t, "the policy released", func() (bool, string) {
		np := getIn(t, w, networkPolicyGVR, "default", "lan")
		_, record := np.GetAnnotations()[dynamicprefix.AnnotationManagedCIDRs]
		return policyPeers(np) == released && !record, fmt.Sprintf("%s (record %v)", policyPeers(np), record)
	})
	for _, wr := range writesBy(t, w, start, writerUser) {
		if wr.Name == "feed" {
			t.Errorf("the writer wrote the set that follows nothing: %s", wr)
		}
	}
	if got := nets(t, w, globalNetworkSetGVR, "", "feed"); !slices.Equal(got, []string{"203.0.113.0/24", "2001:db8:bad::/48"}) {
		t.Errorf("feed: %v", got)
	}
}
