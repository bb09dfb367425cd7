package controller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
)

// Issue 42 ("one tenant"): two Services never
// share an address, and the one created first used to keep it, whichever
// Service held the address. A tenant with any Service older than the
// victim's (here one from 2025; the victim's web was recreated in November)
// sets its dynamic-prefix.io/suffix - its own annotation - to the victim's
// suffix. The next pass releases the victim's address and writes it into the
// tenant's Service (lbipam.cilium.io/ips, and its DNS target): the load
// balancer answered the victim's address, and external-dns pointed the
// tenant's name at it. Default spec.serviceNamespaces (empty) lets every
// namespace follow. Now the Service holding the address keeps it.
//
// Later: "the one that holds it" was read from the Service's own
// dynamic-prefix.io/managed-ips record, an annotation the tenant writes on
// its own Service as freely as its suffix. Copying the suffix and writing the
// victim's address into its own record in the same patch made both "hold"
// it, and the older won: the victim's address was released and written into
// the tenant's Service.
func TestAServiceThatHoldsItsAddressKeepsIt(t *testing.T) {
	for name, patch := range map[string]string{
		"its suffix":                     `{"metadata":{"annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:1"}}}`,
		"its suffix and a forged record": `{"metadata":{"annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:1","dynamic-prefix.io/managed-ips":"2001:db8:a:0:ffff::1"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := tenantOlderThanWeb(t)
			ctx := t.Context()
			// The tenant edits its own Service's annotations.
			if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Patch(ctx, "old", "application/merge-patch+json",
				[]byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			f.catchUp()
			t.Logf("the pass wrote %q", f.sync(passHome))
			f.catchUp()
			tenant, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Get(ctx, "old", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("after: default/web %s=%q; tenant/old %s=%q target=%q", holdings.AnnotationIPs, f.service()[holdings.AnnotationIPs],
				holdings.AnnotationIPs, tenant.Annotations[holdings.AnnotationIPs], tenant.Annotations[holdings.AnnotationTarget])
			if !strings.Contains(f.service()[holdings.AnnotationIPs], "2001:db8:a:0:ffff::1") {
				t.Errorf("default/web lost its address: %q", f.service()[holdings.AnnotationIPs])
			}
			if c := f.condition(render.ServiceAddressConflict); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "tenant/old") {
				t.Errorf("condition %s %s %q, want True naming tenant/old", render.ServiceAddressConflict, c.Status, c.Message)
			}
			if strings.Contains(tenant.Annotations[holdings.AnnotationIPs], "2001:db8:a:0:ffff::1") {
				t.Errorf("the tenant's Service now holds default/web's address 2001:db8:a:0:ffff::1 (%q), web has %q: one tenant moved another's address to itself",
					tenant.Annotations[holdings.AnnotationIPs], f.service()[holdings.AnnotationIPs])
			}
		})
	}
}

// tenantOlderThanWeb is the fixture converged with default/web (recreated
// on 2026-11-01) holding 2001:db8:a:0:ffff::1, beside the tenant's Service
// tenant/old from 2025 following home with a suffix of its own.
func tenantOlderThanWeb(t *testing.T) *fixture {
	t.Helper()
	f := converged(t, generous)
	ctx := t.Context()
	// The victim's Service was (re)created on 2026-11-01.
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(ctx, "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"creationTimestamp":"2026-11-01T00:00:00Z"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The tenant's Service, from 2025, following home with a suffix of its own.
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
	f.sync(passHome)
	f.catchUp()
	if victim := f.service()[holdings.AnnotationIPs]; !strings.Contains(victim, "2001:db8:a:0:ffff::1") {
		t.Fatalf("before: web has %q", victim)
	}
	return f
}

// A new leader term forgets what the writer gave, and reads who holds an
// address from what the load balancer publishes: web, whose
// status.loadBalancer.ingress carries its address (LB-IPAM writes it; a
// tenant's rights over Services do not reach services/status), keeps it
// against the older tenant/old with the suffix and the address copied into
// its own record. Without the status, the new term would have only the two
// records to go on, and the older would win.
func TestANewTermReadsWhoHoldsAnAddressFromTheLoadBalancer(t *testing.T) {
	f := tenantOlderThanWeb(t)
	f.publish("192.0.2.7", "2001:db8:a:0:ffff::1")
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Patch(t.Context(), "old", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"dynamic-prefix.io/suffix":"::ffff:0:0:1","dynamic-prefix.io/managed-ips":"2001:db8:a:0:ffff::1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.ctl.write.Forget()
	t.Logf("the new term's pass wrote %q", f.sync(passHome))
	f.catchUp()
	if !strings.Contains(f.service()[holdings.AnnotationIPs], "2001:db8:a:0:ffff::1") {
		t.Errorf("default/web lost its address: %q", f.service()[holdings.AnnotationIPs])
	}
	if c := f.condition(render.ServiceAddressConflict); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "tenant/old") {
		t.Errorf("condition %s %s %q, want True naming tenant/old", render.ServiceAddressConflict, c.Status, c.Message)
	}
}
