package backends

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Red team r7a: the Service cache keeps the first 64 entries of a Service's
// status.loadBalancer.ingress (holdings.maxKeptIngress), and ByPublished
// indexes only those. A tenant whose own lbipam.cilium.io/ips lists 64
// addresses of its own and then web's next one - granted last, when the pool
// gains the prefix, so its load balancer lists it last - is not found by
// PublishedFor: render.Served sees nobody else publishing web's next
// address, and when A's drain ends web's DNS target moves onto the tenant's
// address with Ready True (red team r6a's F1 again).
func TestRT7AnAddressPublishedPastTheCachesBoundIsStillPublishedForTheTenant(t *testing.T) {
	const next = "2001:db8:b:0:ffff::1"
	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, Indexers)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "squat"}}
	for i := range 64 {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: fmt.Sprintf("2001:db8:b:0:eeee::%x", i+1)})
	}
	svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: next})
	if err := services.Add(holdings.ReadService(svc, holdings.DefaultTargetKeys)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"tenant/squat"}, PublishedFor(services, nil, next)); diff != "" {
		t.Errorf("who a load balancer publishes web's next address for, its 65th entry for the tenant (-want +got):\n%s", diff)
	}
}
