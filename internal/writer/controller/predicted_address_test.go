package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Issue 42, one tenant: a renumbering with no drain (the old prefix gone
// from the nodes' reports at once) makes every ask new: web asks for B::1,
// which nobody was given, while its load balancer and record still name
// A::1. A tenant whose record already names B::1 (a list the tenant writes
// freely: every candidate of the ISP's next prefix fits) must not take it:
// the writer gave web A::1, and B::1 is that address renumbered (same host
// bits under the new prefix), so web holds it by the writer
// (render.HeldByWriter). Before, HeldByWriter matched the address alone:
// web held nothing and the tenant's record won, whatever the ages.
func TestARecordOfThePredictedAddressDoesNotTakeItAtARenumbering(t *testing.T) {
	f := tenantOlderThanWeb(t)
	ctx := t.Context()
	const onB = "2001:db8:b:0:ffff::1"
	// web is now the older of the two: age is not what decides here.
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(ctx, "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"creationTimestamp":"2020-01-01T00:00:00Z"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.publish("192.0.2.7", "2001:db8:a:0:ffff::1")
	f.sync(passHome)
	f.catchUp()
	// The tenant copies web's suffix and records web's address under the
	// next prefix (and others it guesses).
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Patch(ctx, "old", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:1","dynamic-prefix.io/managed-ips":"2001:db8:c:0:ffff::1,`+onB+`"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	// The renumbering: every node reports B alone.
	f.report(3, prefixB)
	for range 2 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	tenant, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("web %q; tenant/old %q", f.service()[holdings.AnnotationIPs], tenant.Annotations[holdings.AnnotationIPs])
	if !strings.Contains(f.service()[holdings.AnnotationIPs], onB) {
		t.Errorf("default/web did not get its new address %s: %q", onB, f.service()[holdings.AnnotationIPs])
	}
	if strings.Contains(tenant.Annotations[holdings.AnnotationIPs], onB) {
		t.Errorf("tenant/old holds web's new address %s (%q): a record it wrote itself took it", onB, tenant.Annotations[holdings.AnnotationIPs])
	}
}
