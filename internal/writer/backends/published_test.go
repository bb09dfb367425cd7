package backends

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Who a load balancer publishes an address for is looked up in the caches
// (ByPublished), named as the claims name them: any Service, following or
// not (status.loadBalancer.ingress), and a Gateway (status.addresses) - its
// IPv6 addresses, the only ones renumber gives. A pool kind that does not
// claim addresses publishes nothing for anyone.
func TestPublishedForNamesWhoALoadBalancerServesAnAddressFor(t *testing.T) {
	const a, b = "2001:db8:b:0:ffff::1", "2001:db8:b:0:ffff::2"
	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, Indexers)
	for _, s := range []struct {
		ns, name string
		ingress  []string
	}{{"tenant", "squat", []string{"192.0.2.9", "2001:DB8:B:0:FFFF::1"}}, {"default", "web", []string{"192.0.2.7"}}} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name}}
		for _, ip := range s.ingress {
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		if err := services.Add(holdings.ReadService(svc, holdings.DefaultTargetKeys)); err != nil {
			t.Fatal(err)
		}
	}
	k := GatewayKind("v1")
	gateways := NewCache(k)
	gw := written(t, []string{b})
	gw.SetNamespace("tenant")
	if err := unstructured.SetNestedSlice(gw.Object, []any{map[string]any{"type": "IPAddress", "value": a}}, "status", "addresses"); err != nil {
		t.Fatal(err)
	}
	slim, err := k.Slim(gw)
	if err != nil {
		t.Fatal(err)
	}
	if err := gateways.Add(slim); err != nil {
		t.Fatal(err)
	}
	pools := []Cached{{Kind: k, Store: gateways}}
	for addr, want := range map[string][]string{
		a:           {"tenant/squat", "Gateway tenant/web"},
		b:           nil,
		"192.0.2.9": nil,
	} {
		if diff := cmp.Diff(want, PublishedFor(services, pools, addr)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", addr, diff)
		}
	}
	notClaiming := *k
	notClaiming.Claims = false
	if got := PublishedFor(services, []Cached{{Kind: &notClaiming, Store: gateways}}, a); !cmp.Equal(got, []string{"tenant/squat"}) {
		t.Errorf("with a kind that claims nothing: %q", got)
	}
}

// The Service Cilium's Gateway controller generates for a Gateway is
// cilium-gateway-<name> in the Gateway's own namespace: what a load
// balancer publishes for it is the Gateway's to count (GeneratedPublished),
// never what it publishes for a Service of that name in another namespace.
func TestGeneratedPublishedIsWhatTheLoadBalancerPublishesForTheGatewaysOwnService(t *testing.T) {
	const a, b = "2001:db8:b:0:ffff::1", "2001:db8:b:0:ffff::2"
	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, Indexers)
	for ns, ip := range map[string]string{"tenant": "2001:DB8:B:0:FFFF::1", "default": b} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cilium-gateway-web"}}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		if err := services.Add(holdings.ReadService(svc, holdings.DefaultTargetKeys)); err != nil {
			t.Fatal(err)
		}
	}
	k := GatewayKind("v1")
	gw := written(t, []string{b})
	gw.SetNamespace("tenant")
	p, err := k.Read(gw)
	if err != nil {
		t.Fatal(err)
	}
	if got := GeneratedPublished(services, p.(*Pool)); !cmp.Equal(got, []string{a}) {
		t.Errorf("GeneratedPublished = %q, want %q", got, []string{a})
	}
	other := p.(*Pool)
	other.Name = "api"
	if got := GeneratedPublished(services, other); got != nil {
		t.Errorf("a Gateway without a generated Service: %q, want none", got)
	}
}

// Past the bound a Gateway's cache keeps its echoed surplus only inside the
// DynamicPrefixes' space, summarised never coarser than a prefix of it
// (ReadIn, holdings.BoundedIn), and its index reads that summary as it is.
// Here the space is ten /64s (ten DynamicPrefixes, or one's history) and
// the tenant's Gateway echoes 64 addresses, then one on each of nine of
// the /64s and one far outside: it is taken to publish what lies in those
// nine, never the tenth /64 nor anything outside. Before, the index bounded
// the kept status again without the space - nine prefixes past maxMore,
// ::/0 - and the cache kept the far one's /64.
func TestAGatewaysSurplusIsPublishedOnlyInsideTheSpace(t *testing.T) {
	var space []netip.Prefix
	for i := range 10 {
		space = append(space, netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/64", i+1)))
	}
	var echoed []any
	for i := range 64 {
		echoed = append(echoed, map[string]any{"type": "IPAddress", "value": fmt.Sprintf("2001:db8:eeee::%x", i+1)})
	}
	for i := range 9 {
		echoed = append(echoed, map[string]any{"type": "IPAddress", "value": fmt.Sprintf("2001:db8:%x::99", i+1)})
	}
	echoed = append(echoed, map[string]any{"type": "IPAddress", "value": "2001:db8:ffff::99"})
	k := GatewayKind("v1")
	gateways := NewCacheIn(k, func() []netip.Prefix { return space })
	gw := written(t, nil)
	gw.SetNamespace("tenant")
	if err := unstructured.SetNestedSlice(gw.Object, echoed, "status", "addresses"); err != nil {
		t.Fatal(err)
	}
	if err := gateways.Add(gw); err != nil {
		t.Fatal(err)
	}
	pools := []Cached{{Kind: k, Store: gateways}}
	for addr, want := range map[string][]string{
		"2001:db8:eeee::1":     {"Gateway tenant/web"}, // kept whole
		"2001:db8:1::1":        {"Gateway tenant/web"}, // in a /64 of the space it echoes past the bound
		"2001:db8:9:0:ffff::1": {"Gateway tenant/web"},
		"2001:db8:a::99":       nil, // the tenth /64 of the space: it echoes nothing there
		"2001:db8:ffff::99":    nil, // outside the space, past the bound
		"2001:db8:ffff::1":     nil,
	} {
		if diff := cmp.Diff(want, PublishedFor(cache.NewIndexer(cache.MetaNamespaceKeyFunc, Indexers), pools, addr)); diff != "" {
			t.Errorf("who a load balancer publishes %s for (-want +got):\n%s", addr, diff)
		}
	}
}

// Cilium's Gateway controller names the Service it generates for a Gateway
// cilium-gateway-<name>, shortened as Cilium shortens every name it makes
// past 63 characters (pkg/shortener: the first 52, a dash and 10 characters
// of the whole name's SHA-256): the writer looks up what a load balancer
// publishes for the Gateway under that exact name. The shortened names here
// were computed once with Cilium v1.20.1's shortener.ShortenK8sResourceName.
func TestTheGeneratedServiceOfALongGatewayNameIsCiliumsShortenedName(t *testing.T) {
	k := GatewayKind("v1")
	for name, want := range map[string]string{
		"web":                   "cilium-gateway-web",
		strings.Repeat("a", 48): "cilium-gateway-" + strings.Repeat("a", 48), // 63 characters: as it is
		strings.Repeat("a", 49): "cilium-gateway-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-c6h6b9477c",
		"the-gateway-of-the-home-cluster-that-serves-every-tenant": "cilium-gateway-the-gateway-of-the-home-cluster-that--m5k4275kb7",
		strings.Repeat("g", 253):                                   "cilium-gateway-ggggggggggggggggggggggggggggggggggggg-54d2cmfg9d",
	} {
		if got := k.Generated("tenant", name); got != "tenant/"+want {
			t.Errorf("the Service generated for Gateway tenant/%s is %q, want tenant/%s", name, got, want)
		}
	}
}
