package e2e

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/tools/world"
)

// TestTheMappedAddressIsTheKernels: the world's router translates a ULA
// prefix on the LAN onto the ISP's prefix with Linux's own translation
// (ip6tables SNPT/DNPT for nptv6, NETMAP for netmap); a client on the WAN
// side connects to the address model.Map computes and reaches the listener on
// the ULA address inside - which sees its own ULA address, and the client's
// - before and after the ISP's prefix changes; the old address then reaches
// nothing. With a /64, the word adjusted is the interface identifier's first
// that is not 0xFFFF.
func TestTheMappedAddressIsTheKernels(t *testing.T) {
	t.Parallel() // its subtests start worlds: among the other world tests, not before them
	for _, tt := range []struct {
		name, mapping string
		inside        string
		outside       [2]string
		listeners     []string
	}{
		{"nptv6 /48, RFC 6296's prefixes", model.MappingNPTv6, "fd01:203:405::/48",
			[2]string{"2001:db8:1::/48", "2001:db8:2::/48"}, []string{"fd01:203:405:1::1234"}},
		{"nptv6 /64", model.MappingNPTv6, "fd00:1:2:3::/64",
			[2]string{"2001:db8:7:3::/64", "2001:db8:8:3::/64"}, []string{"fd00:1:2:3::10", "fd00:1:2:3:ffff::10"}},
		{"netmap /56", model.MappingNetmap, "fd00:1:2::/56",
			[2]string{"2001:db8:7:100::/56", "2001:db8:8:100::/56"}, []string{"fd00:1:2:3::10"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorldWith(t, 1, false)
			ctx := t.Context()
			inside := netip.MustParsePrefix(tt.inside)
			tr, err := w.Net.Translator(ctx, tt.mapping, inside)
			if err != nil {
				t.Fatal(err)
			}
			node, err := w.Net.Node("node1")
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tt.listeners {
				if err := tr.Listen(ctx, node, netip.MustParseAddr(l), 8080); err != nil {
					t.Fatal(err)
				}
			}
			var before []netip.Addr
			for _, o := range tt.outside {
				outside := netip.MustParsePrefix(o)
				if err := tr.Map(ctx, outside); err != nil {
					t.Fatal(err)
				}
				for _, l := range tt.listeners {
					ula := netip.MustParseAddr(l)
					target, err := model.Map(tt.mapping, ula, inside, outside)
					if err != nil {
						t.Fatal(err)
					}
					line, err := tr.Dial(ctx, target, 8080)
					want := "[" + ula.String() + "]:8080 [" + tr.ClientAddr.String() + "]:"
					if err != nil || !strings.HasPrefix(line, want) {
						t.Errorf("%s as %s under %s: %q, %v; want %q...", ula, target, outside, line, err, want)
					}
				}
				for _, old := range before {
					if line, err := tr.Dial(ctx, old, 8080); err == nil {
						t.Errorf("the address under the replaced prefix, %s, still reaches %q", old, line)
					}
				}
				before = before[:0]
				for _, l := range tt.listeners {
					target, _ := model.Map(tt.mapping, netip.MustParseAddr(l), inside, outside)
					before = append(before, target)
				}
			}
		})
	}
}

// TestAULAServiceIsPublishedUnderThePublicPrefix: the Service's address is
// a ULA (asked of Cilium's LB-IPAM from the user's ULA pool), which the
// router maps onto the ISP's /48 with NPTv6. The ISP's prefix reaches the
// cluster either in RAs, as one /64 of that /48 (delegatedPrefixLength 48),
// or - the LAN carrying no public prefix at all - from the router's dynamic
// DNS name, which two real DNS servers answer with an address in the /48.
// The DNS target is the mapped address, beside the user's IPv4 target; a
// client on the WAN reaches the Service's listener through it. The ISP
// renumbers: the target follows in one write, the ULA address is never
// written, and the client reaches the listener through the new target;
// kubectl renumber status shows the mapping.
func TestAULAServiceIsPublishedUnderThePublicPrefix(t *testing.T) {
	t.Parallel() // its subtests start worlds: among the other world tests, not before them
	delegationA, delegationB := netip.MustParsePrefix("2001:db8:1::/48"), netip.MustParsePrefix("2001:db8:2::/48")
	for _, source := range []struct {
		name string
		// follow sets up the source of delegationA and the DynamicPrefix
		// "home" following it; it returns how the ISP renumbers to delegationB.
		follow func(t *testing.T, w *world.World) (renumber func())
	}{
		{"router advertisements", func(t *testing.T, w *world.World) func() {
			advertise(t, w, prefixA) // 2001:db8:1:100::/64, in delegationA
			createDP(t, w, "home", map[string]any{
				"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0", "delegatedPrefixLength": 48}},
			})
			return func() { advertise(t, w, prefixB, prefixA) } // 2001:db8:2:200::/64, in delegationB
		}},
		{"the router's DNS name", func(t *testing.T, w *world.World) func() {
			ns := nameServers(t, w, 2, "router.example.net.", 2*time.Second, netip.MustParseAddr("2001:db8:1:ff::1"))
			createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dns": map[string]any{
				"name": "router.example.net.", "prefixLength": 48, "minInterval": "1s",
				"servers": []any{ns[0].Addr.String(), ns[1].Addr.String()}}}})
			return func() { answer(t, netip.MustParseAddr("2001:db8:2:ff::1"), ns...) }
		}},
	} {
		t.Run(source.name, func(t *testing.T) {
			w := newWorld(t, 1)
			ctx := t.Context()
			tr, inside, ula := mappedService(t, w, map[string]string{holdings.AnnotationTarget: "192.0.2.10"})
			renumber := source.follow(t, w)
			if err := tr.Map(ctx, delegationA); err != nil {
				t.Fatal(err)
			}
			startAgent(t, w, "node1")
			startWriter(t, w, "writer-a")

			published := func(target string) {
				t.Helper()
				eventually(t, "DNS publishes "+target, func() (bool, string) {
					s, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
					if err != nil {
						return false, err.Error()
					}
					ok := s.Annotations[holdings.AnnotationIPs] == ula.String() && slices.Equal(holdings.Ingress(s), []string{ula.String()}) &&
						s.Annotations[holdings.AnnotationTarget] == "192.0.2.10,"+target && s.Annotations[holdings.AnnotationTargetAlpha] == target
					return ok, fmt.Sprintf("ingress %q, annotations %v", holdings.Ingress(s), s.Annotations)
				})
				line, err := tr.Dial(ctx, netip.MustParseAddr(target), 8080)
				if want := "[" + ula.String() + "]:8080 "; err != nil || !strings.HasPrefix(line, want) {
					t.Errorf("the WAN client through %s: %q, %v; want %q...", target, line, err, want)
				}
			}
			targetA, _ := model.Map(model.MappingNPTv6, ula, inside, delegationA)
			published(targetA.String())
			settleWrites()

			m := mark(t, w)
			renumber()
			if err := tr.Map(ctx, delegationB); err != nil {
				t.Fatal(err)
			}
			targetB, _ := model.Map(model.MappingNPTv6, ula, inside, delegationB)
			published(targetB.String())
			if got, want := serviceWrites(t, w, m), []string{"patch services web 200"}; !slices.Equal(got, want) {
				t.Errorf("the renumbering wrote %q to the Service, want %q", got, want)
			}
			if line, err := tr.Dial(ctx, targetA, 8080); err == nil {
				t.Errorf("the old target %s still answers: %q", targetA, line)
			}

			// kubectl renumber status shows the mapping.
			out := status(t, statusIdentity(t, w))
			want := fmt.Sprintf("maps %s -> %s (nptv6, %s onto %s)", ula, targetB, inside, delegationB)
			if !strings.Contains(out, want) {
				t.Errorf("kubectl renumber status lacks %q:\n%s", want, out)
			}
		})
	}
}

// mappedService is the NPTv6 world's Service: LB-IPAM running, the
// router translating the ULA /48 fd01:203:405::/48 with NPTv6 (Map sets
// the outside prefix), node1 listening on the ULA fd01:203:405:1::1234 port
// 8080 (the node announcing the Service), the user's ULA pool, and the
// Service "web" following DynamicPrefix "home" with that mapping, asking for
// that ULA, with the annotations ann besides.
func mappedService(t *testing.T, w *world.World, ann map[string]string) (tr *world.Translator, inside netip.Prefix, ula netip.Addr) {
	t.Helper()
	ctx := t.Context()
	if _, err := w.StartLBIPAM(); err != nil {
		t.Fatal(err)
	}
	inside, ula = netip.MustParsePrefix("fd01:203:405::/48"), netip.MustParseAddr("fd01:203:405:1::1234")
	tr, err := w.Net.Translator(ctx, model.MappingNPTv6, inside)
	if err != nil {
		t.Fatal(err)
	}
	node, err := w.Net.Node("node1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Listen(ctx, node, ula, 8080); err != nil {
		t.Fatal(err)
	}
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "ula"},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "fd01:203:405:1::/64"}}},
	})
	all := map[string]string{dynamicprefix.AnnotationName: "home", holdings.AnnotationMapping: model.MappingNPTv6,
		holdings.AnnotationMappingPrefix: inside.String(), holdings.AnnotationIPs: ula.String()}
	maps.Copy(all, ann)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: all},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 8080}},
			IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol}, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack)},
	}
	if _, err := w.API.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return tr, inside, ula
}

// publicPrefixRenumbered runs two nodes' agents and a writer on a world
// whose router advertises the ULA beside the ISP's /64 as public(cur, old)
// says, with DynamicPrefix "home" following eth0 as ra says and pool "lb"
// following it: the pool follows A, then B through a renumbering with one
// pool and one status write.
func publicPrefixRenumbered(t *testing.T, ula netip.Prefix, public func(cur netip.Prefix, old ...netip.Prefix) []world.Advert, ra map[string]any) *world.World {
	t.Helper()
	w := newWorld(t, 2)
	announce := func(cur netip.Prefix, old ...netip.Prefix) {
		t.Helper()
		ads := append([]world.Advert{{Prefix: ula, Valid: 600 * time.Second, Preferred: 300 * time.Second}}, public(cur, old...)...)
		if err := w.Net.Router.Advertise(t.Context(), ads...); err != nil {
			t.Fatal(err)
		}
	}
	announce(prefixA)
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"routerAdvertisement": ra}})
	createPool(t, w)
	for _, n := range []string{"node1", "node2"} {
		startAgent(t, w, n)
	}
	startWriter(t, w, "writer-a")
	poolIs(t, w, "the pool follows A", prefixA.String())
	settleWrites()

	m := mark(t, w)
	announce(prefixB, prefixA)
	poolIs(t, w, "the pool follows B, A draining", prefixB.String(), prefixA.String())
	settleWrites()
	want := []string{"patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200"}
	if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
		t.Errorf("the renumbering wrote %q, want %q", got, want)
	}
	return w
}

// TestAPublicPrefixNoHostConfiguresIsFollowed: behind NPTv6 the LAN's hosts
// live on the ULA; the router also advertises the ISP's /64 without the
// autonomous flag, so that no host forms an address in it. The
// DynamicPrefix follows that prefix (the ULA, not global unicast, is never
// adopted) through a renumbering - one pool and one status write - and no
// node ever holds an address in it, while each forms one in the ULA.
func TestAPublicPrefixNoHostConfiguresIsFollowed(t *testing.T) {
	ula := netip.MustParsePrefix("fd01:203:405:1::/64")
	w := publicPrefixRenumbered(t, ula, func(cur netip.Prefix, old ...netip.Prefix) []world.Advert {
		ads := []world.Advert{{Prefix: cur, Valid: 600 * time.Second, Preferred: 300 * time.Second, NotAutonomous: true}}
		for _, o := range old {
			ads = append(ads, world.Advert{Prefix: o, Valid: 600 * time.Second, NotAutonomous: true})
		}
		return ads
	}, map[string]any{"interface": "eth0"})
	ctx := t.Context()
	for _, nd := range w.Net.Nodes {
		addrs, err := nd.Addrs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inULA := false
		for _, a := range addrs {
			if prefixA.Contains(a.Prefix.Addr()) || prefixB.Contains(a.Prefix.Addr()) {
				t.Errorf("%s formed %s from a prefix without the autonomous flag", nd.Name, a.Prefix)
			}
			inULA = inULA || ula.Contains(a.Prefix.Addr())
		}
		if !inULA {
			t.Errorf("%s formed no address in the ULA %s: %v", nd.Name, ula, addrs)
		}
	}
}

// TestAPublicPrefixAdvertisedDeprecatedIsFollowed: the router advertises
// the ISP's /64 only with preferred lifetime 0 beside the ULA, so that hosts
// do not use it as a source; with followDeprecated the agents report it as
// preferred (it stands in), and the DynamicPrefix follows it through a
// renumbering - the new prefix with its whole valid lifetime (10 minutes),
// the old one with 5 minutes left: one pool and one status write. A host that starts
// advertising a third prefix the same way, valid for a day, moves nothing:
// only the senior router's prefixes stand in.
func TestAPublicPrefixAdvertisedDeprecatedIsFollowed(t *testing.T) {
	w := publicPrefixRenumbered(t, netip.MustParsePrefix("fd01:203:405:1::/64"), func(cur netip.Prefix, old ...netip.Prefix) []world.Advert {
		ads := []world.Advert{{Prefix: cur, Valid: 600 * time.Second, Preferred: 0}}
		for _, o := range old {
			ads = append(ads, world.Advert{Prefix: o, Valid: 300 * time.Second, Preferred: 0})
		}
		return ads
	}, map[string]any{"interface": "eth0", "followDeprecated": true})
	ctx := t.Context()

	m := mark(t, w)
	rogue, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	foreign := netip.MustParsePrefix("2001:db8:bad::/64")
	if err := rogue.Advertise(ctx, world.Advert{Prefix: foreign, Valid: 24 * time.Hour, Preferred: 0}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node1", "node2"} {
		eventually(t, n+" hears the later host's prefix", func() (bool, string) {
			d, _ := annotation(t, w, n)
			return strings.Contains(d, foreign.String()+" d"), d
		})
	}
	settleWrites()
	if got := objectWrites(writesBy(t, w, m, writerUser)); len(got) != 0 {
		t.Errorf("a later host's deprecated prefix wrote %q", got)
	}
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != prefixB.String() {
		t.Errorf("a later host moved the prefix to %s", st.CurrentPrefix)
	}
}
