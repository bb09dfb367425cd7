package controller

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// Issue 42 (red team r6a), a tenant with one Service more than the subjects
// the writer's events remember (4096), each following home with a subnet the
// spec lacks (InvalidServiceAnnotations every pass): once each was
// announced, three passes over nothing changed announce one of them again a
// pass - the one the memory has no room for - and nothing else. Before, the
// memory was forgotten whole past its bound, and every pass announced all
// 4097 again.
func TestServicesPastTheEventMemoryAreAnnouncedOnceAPass(t *testing.T) {
	const services = 4096 + 1
	f := converged(t, generous)
	invalidServices(t, f, services)
	f.sync(passHome)
	f.catchUp()
	if n := count(f.events.warnings, "InvalidServiceAnnotations"); n != services {
		t.Fatalf("the first pass warned of %d Services, want %d", n, services)
	}
	f.events.reset()
	for range 3 {
		if got := f.sync(passHome); len(got) != 0 {
			t.Errorf("a pass over nothing changed wrote %q", got)
		}
		f.catchUp()
	}
	if n := count(f.events.warnings, "InvalidServiceAnnotations"); n != 3 || len(f.events.reasons) != 3 {
		t.Errorf("three passes over nothing changed emitted %d events, %d InvalidServiceAnnotations; want 3, the Service past the memory's bound once a pass", len(f.events.reasons), n)
	}
}

// count is how many of events begin with reason.
func count(events []string, reason string) int {
	n := 0
	for _, e := range events {
		if len(e) > len(reason) && e[:len(reason)+1] == reason+" " {
			n++
		}
	}
	return n
}

// Eight of a tenant's Services that cannot be rendered (a subnet the spec
// lacks): PoolsSynced names the first, and passes over nothing changed
// write nothing. Before, the cache listed them in any order, each pass
// named another, and wrote the status again.
func TestInvalidServicesDoNotRewriteTheStatusEveryPass(t *testing.T) {
	f := converged(t, generous)
	invalidServices(t, f, 8)
	f.sync(passHome)
	f.catchUp()
	for range 5 {
		if got := f.sync(passHome); len(got) != 0 {
			t.Errorf("a pass over nothing changed wrote %q", got)
		}
		f.catchUp()
	}
}

// invalidServices adds n Services in namespace tenant following home on a
// subnet its spec lacks, and lets the caches show them.
func invalidServices(t *testing.T, f *fixture, n int) {
	t.Helper()
	creator := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").(interface {
		CreateFake(*metav1.PartialObjectMetadata, metav1.CreateOptions, ...string) (*metav1.PartialObjectMetadata, error)
	})
	for i := range n {
		s := &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: fmt.Sprintf("s%d", i), ResourceVersion: "1",
				Annotations: map[string]string{dynamicprefix.AnnotationName: "home", holdings.AnnotationSuffix: "::1", "dynamic-prefix.io/service-subnet": "nosuch"}},
		}
		if _, err := creator.CreateFake(s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.catchUp()
}
