package holdings

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// TestAServiceIsReadOnceWhenCached: what a Service follows, carries and
// publishes is read when it enters the cache; a pass asking for it under the
// cache's target keys reads nothing again, under other keys it reads them.
func TestAServiceIsReadOnceWhenCached(t *testing.T) {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: map[string]string{
		dynamicprefix.AnnotationName: "home", AnnotationSuffix: "::1", AnnotationMapping: "nptv6", AnnotationMappingPrefix: "fd00::/64",
		AnnotationIPs: "192.0.2.7,2001:db8:a::1", AnnotationManagedIPs: "2001:db8:a::1", "other": "dropped",
	}}}
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "2001:db8:a:0::1"}, {Hostname: "lb.example"}}
	before := ServicesRead()
	c := ReadService(s, DefaultTargetKeys)
	if n := ServicesRead() - before; n != 1 {
		t.Errorf("reading a Service read it %d times, want once", n)
	}
	want := ServiceFollow{DynamicPrefix: "home", Suffix: "::1", Mapping: "nptv6", MappingPrefix: "fd00::/64"}
	if diff := cmp.Diff(want, c.Follow); diff != "" {
		t.Errorf("follow (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"2001:db8:a::1"}, c.Ingress); diff != "" {
		t.Errorf("ingress (-want +got):\n%s", diff)
	}
	if _, kept := c.Annotations["other"]; kept {
		t.Error("an annotation renumber does not read was kept")
	}
	if diff := cmp.Diff(Live(s.Annotations, DefaultTargetKeys), c.LiveUnder(DefaultTargetKeys)); diff != "" {
		t.Errorf("live under the cache's keys (-want +got):\n%s", diff)
	}
	keys := []string{AnnotationTarget}
	if diff := cmp.Diff(Live(s.Annotations, keys), c.LiveUnder(keys)); diff != "" {
		t.Errorf("live under other keys (-want +got):\n%s", diff)
	}
}
