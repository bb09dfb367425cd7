package controller

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// A Service's release is a write like any other (red team r10b F2): when
// its owner puts renumber's record back as fast as the writer takes it
// off, the releases take from the Service's write budget, and the fight is
// reported once - one WriteBudgetExceeded event for it, not one a pass -
// with one ServiceReleased event for each release made.
func TestAReleaseFightTakesFromTheBudgetAndIsReportedOnce(t *testing.T) {
	f := converged(t, shippedLimits(t))
	services := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant")
	record := fmt.Sprintf(`{"metadata":{"annotations":{%q:"2001:db8:eeee::1"}}}`, holdings.AnnotationManagedIPs)
	copied := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "copy", ResourceVersion: "1",
			Annotations: map[string]string{holdings.AnnotationManagedIPs: "2001:db8:eeee::1"}},
	}
	if _, err := services.(interface {
		CreateFake(*metav1.PartialObjectMetadata, metav1.CreateOptions, ...string) (*metav1.PartialObjectMetadata, error)
	}).CreateFake(copied, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.events.reasons = nil
	release := Key{Action: ReleaseService, Namespace: "tenant", Name: "copy"}
	writes := 0
	for range 120 {
		f.clock.Step(time.Second)
		s, err := services.Get(t.Context(), "copy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Annotations[holdings.AnnotationManagedIPs] == "" {
			if _, err := services.Patch(t.Context(), "copy", "application/merge-patch+json", []byte(record), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		f.catchUp()
		writes += equal(f.settle(release), "patch services copy")
	}
	limits := shippedLimits(t)
	if bound := limits.ObjectBurst + int(limits.ObjectPerMinute*2); writes == 0 || writes > bound {
		t.Errorf("the writer released tenant/copy %d times in 2 minutes of its owner putting the record back, want 1 to %d (the breaker's burst and rate)", writes, bound)
	}
	if n := count(f.events.reasons, "ServiceReleased"); n != writes {
		t.Errorf("%d ServiceReleased events for %d releases, want one each", n, writes)
	}
	if n := count(f.events.reasons, "WriteBudgetExceeded"); n != 1 {
		t.Errorf("%d WriteBudgetExceeded events in a fight over one release (%q), want 1: a refusal is reported once, not a pass", n, f.events.reasons)
	}
}
