package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"
)

// Services are offered their addresses oldest first: the first to ask keeps
// an address, a later one asking for any of it gets none, whatever order the
// cache lists them in.
func TestTheServiceThatAskedFirstKeepsItsAddress(t *testing.T) {
	svc := func(ns, name string, created int64) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Unix(created, 0)}}
	}
	asks := map[string][]string{
		"default/web":   {"2001:db8:1::1", "2001:db8:2::1"},
		"default/copy":  {"2001:db8:1::1", "2001:db8:2::1"},
		"tenant/late":   {"2001:db8:2::1"},
		"default/other": {"2001:db8:1::2"},
	}
	listed := []*corev1.Service{svc("tenant", "late", 9), svc("default", "copy", 5), svc("default", "other", 5), svc("default", "web", 1)}
	slices.SortFunc(listed, ByAge)
	claims := Claims{}
	var got []Conflict
	for _, s := range listed {
		key := s.Namespace + "/" + s.Name
		if c, ok := claims.Claim(key, asks[key]); !ok {
			got = append(got, c)
		}
	}
	SortConflicts(got)
	want := []Conflict{
		{Address: "2001:db8:1::1", Holder: "default/web", Loser: "default/copy"},
		{Address: "2001:db8:2::1", Holder: "default/web", Loser: "tenant/late"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conflicts (-want +got):\n%s", diff)
	}
	if claims["2001:db8:1::2"] != "default/other" {
		t.Errorf("a Service asking for its own address: held by %q", claims["2001:db8:1::2"])
	}
}

// A conflict is a condition while it lasts, and leaves no condition behind:
// a DynamicPrefix that never had one keeps the status it had.
func TestAConflictIsAConditionWhileItLasts(t *testing.T) {
	dp := &api.DynamicPrefix{Spec: dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{}}}}
	m := model.Parse(dp.Name, dp.Spec)
	d := decided(t, dp, "v1;eth0=2001:db8:a::/64 p ra", t0)
	conflict := []Conflict{{Address: "2001:db8:a::1", Holder: "default/web", Loser: "default/copy"}}
	st := Status(dp, m, d, Problems{Conflicts: conflict}, t0)
	c := meta.FindStatusCondition(st.Conditions, ServiceAddressConflict)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "default/copy gets none") {
		t.Fatalf("with a conflict: %+v", c)
	}
	if r := meta.FindStatusCondition(st.Conditions, Ready); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("Ready with a conflict (the holder is served): %+v", r)
	}
	dp.Status = roundTrip(t, st)
	if c := meta.FindStatusCondition(Status(dp, m, d, Problems{}, t0).Conditions, ServiceAddressConflict); c != nil {
		t.Errorf("once resolved: %+v", c)
	}
	if c := meta.FindStatusCondition(Status(&api.DynamicPrefix{Spec: dp.Spec}, m, d, Problems{}, t0).Conditions, ServiceAddressConflict); c != nil {
		t.Errorf("never a conflict: %+v", c)
	}
}
