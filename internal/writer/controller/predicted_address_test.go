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
// the writer gave web A::1, and B::1 is that address renumbered (web's
// placement, the one it was given, under the new prefix), so web holds it
// by the writer (render.HeldByWriter). Before, HeldByWriter matched the
// address alone: web held nothing and the tenant's record won, whatever the
// ages.
func TestARecordOfThePredictedAddressDoesNotTakeItAtARenumbering(t *testing.T) {
	f := tenantOlderThanWeb(t)
	// The tenant copies web's suffix and records web's address under the
	// next prefix (and others it guesses).
	aRecordOfWebsNextAddress(t, f, "2001:db8:a:0:ffff::1", "2001:db8:b:0:ffff::1",
		`"dynamic-prefix.io/suffix":"::ffff:0:0:1","dynamic-prefix.io/managed-ips":"2001:db8:c:0:ffff::1,2001:db8:b:0:ffff::1"`)
}

// The same with web on a subnet of the delegation (routerAdvertisement.
// delegatedPrefixLength 56, spec.subnets "lb6" the 255th /64, web's
// dynamic-prefix.io/service-subnet lb6): web's addresses are
// 2001:db8:a:ff:ffff::1, then 2001:db8:b:ff:ffff::1 - outside the pooled
// /64s 2001:db8:a::/64 and 2001:db8:b::/64. The writer remembers the
// placement it gave web (render.Given.Placed) and follows it onto the new
// prefix. Found by the third red team: the writer's memory followed the
// host bits only under a pooled prefix containing the address, so web held
// nothing there, and the tenant's record won though web is the older.
func TestARecordOfThePredictedAddressOnASubnetDoesNotTakeItAtARenumbering(t *testing.T) {
	f := tenantOlderThanWeb(t)
	ctx := t.Context()
	f.delegateHome(t, "lb6")
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(ctx, "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"dynamic-prefix.io/service-subnet":"lb6"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.sync(passHome)
	f.catchUp()
	const onA, onB = "2001:db8:a:ff:ffff::1", "2001:db8:b:ff:ffff::1"
	if victim := f.service()[holdings.AnnotationIPs]; !strings.Contains(victim, onA) {
		t.Fatalf("before: web has %q, want %s", victim, onA)
	}
	// The tenant copies web's suffix and subnet and records web's next address.
	aRecordOfWebsNextAddress(t, f, onA, onB,
		`"dynamic-prefix.io/suffix":"::ffff:0:0:1","dynamic-prefix.io/service-subnet":"lb6","dynamic-prefix.io/managed-ips":"`+onB+`"`)
}

// aRecordOfWebsNextAddress makes web the older, has its load balancer
// publish onA, gives tenant/old the annotations tenant (JSON members), and
// renumbers with no drain (every node reports B alone): web must get onB,
// and tenant/old must not.
func aRecordOfWebsNextAddress(t *testing.T, f *fixture, onA, onB, tenant string) {
	t.Helper()
	ctx := t.Context()
	// web is now the older of the two: age is not what decides here.
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(ctx, "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"creationTimestamp":"2020-01-01T00:00:00Z"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.publish("192.0.2.7", onA)
	f.sync(passHome)
	f.catchUp()
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Patch(ctx, "old", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{`+tenant+`}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	old := renumberedWithNoDrain(t, f)
	if !strings.Contains(f.service()[holdings.AnnotationIPs], onB) {
		t.Errorf("default/web did not get its new address %s: %q", onB, f.service()[holdings.AnnotationIPs])
	}
	if strings.Contains(old.Annotations[holdings.AnnotationIPs], onB) {
		t.Errorf("tenant/old holds web's new address %s (%q): a record it wrote itself took it", onB, old.Annotations[holdings.AnnotationIPs])
	}
}

// renumberedWithNoDrain has every node report B alone (A gone at once),
// runs the passes that follow, and returns tenant/old as they left it.
func renumberedWithNoDrain(t *testing.T, f *fixture) *metav1.PartialObjectMetadata {
	t.Helper()
	f.report(3, prefixB)
	for range 2 {
		t.Logf("the pass wrote %q", f.sync(passHome))
		f.catchUp()
	}
	old, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(t.Context(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("web %q target %q; tenant/old %q target %q", f.service()[holdings.AnnotationIPs], f.service()[holdings.AnnotationTarget],
		old.Annotations[holdings.AnnotationIPs], old.Annotations[holdings.AnnotationTarget])
	return old
}
