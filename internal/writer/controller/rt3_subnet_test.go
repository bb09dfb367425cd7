package controller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// Red team r3 (issue 42, one tenant): TestARecordOfThePredictedAddress-
// DoesNotTakeItAtARenumbering again, with web on a subnet of the delegation
// (routerAdvertisement.delegatedPrefixLength 56, spec.subnets "lb6" the
// 255th /64, web's dynamic-prefix.io/service-subnet lb6): web's addresses
// are 2001:db8:a:ff:ffff::1, then 2001:db8:b:ff:ffff::1 - outside the pooled
// /64s 2001:db8:a::/64 and 2001:db8:b::/64. The writer's memory follows the
// host bits only under a pooled prefix that contains the address
// (render.HoldOf's renumbered), so at a renumbering with no drain web holds
// nothing, and the tenant's record naming web's next address wins, though
// web is the older.
func TestRT3ARecordOfThePredictedAddressOnASubnetDoesNotTakeIt(t *testing.T) {
	f := newFixture(t, generous)
	ctx := t.Context()
	u, err := f.dyn.Resource(api.GVR).Get(ctx, "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, int64(56), "spec", "acquisition", "routerAdvertisement", "delegatedPrefixLength"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "lb6", "offset": int64(255), "prefixLength": int64(64)}}, "spec", "subnets"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(api.GVR).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(ctx, "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"dynamic-prefix.io/service-subnet":"lb6"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	// The tenant's Service, following home with a suffix of its own.
	old := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "old", ResourceVersion: "1",
			CreationTimestamp: metav1.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
			Annotations:       map[string]string{dynamicprefix.AnnotationName: "home", holdings.AnnotationSuffix: "::ffff:0:0:99"}},
	}
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").(interface {
		CreateFake(*metav1.PartialObjectMetadata, metav1.CreateOptions, ...string) (*metav1.PartialObjectMetadata, error)
	}).CreateFake(old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.report(3, prefixA)
	f.sync(passHome)
	f.catchUp()
	const onA, onB = "2001:db8:a:ff:ffff::1", "2001:db8:b:ff:ffff::1"
	if victim := f.service()[holdings.AnnotationIPs]; !strings.Contains(victim, onA) {
		t.Fatalf("before: web has %q, want %s", victim, onA)
	}
	// web is now the older of the two: age is not what decides here.
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(ctx, "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"creationTimestamp":"2020-01-01T00:00:00Z"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.publish("192.0.2.7", onA)
	f.sync(passHome)
	f.catchUp()
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Patch(ctx, "old", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:1","dynamic-prefix.io/service-subnet":"lb6","dynamic-prefix.io/managed-ips":"`+onB+`"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.report(3, prefixB) // the renumbering, with no drain
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
