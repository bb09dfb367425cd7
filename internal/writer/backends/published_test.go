package backends

import (
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
