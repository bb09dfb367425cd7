package render

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

// publishedFor is a Served.Others over a fixed map: address -> who.
func publishedFor(m map[string][]string) func(string) []string {
	return func(a string) []string { return m[a] }
}

// Issue 42 (red team r6a, F1): a Service's DNS target is never an address a
// load balancer publishes for another object only - whatever the writer's
// claims say, the load balancer serves it there, and DNS would send the
// Service's traffic to the other. It stays on an address published for the
// Service itself (its draining one), else it has none; an address the
// Service's own load balancer publishes is its own, whoever shares it.
func TestTheTargetIsNeverAnAddressPublishedForAnother(t *testing.T) {
	f := holdings.ServiceFollow{Suffix: "::ffff:0:1"}
	const was, now = "2001:db8:a::ffff:0:1", "2001:db8:b::ffff:0:1"
	keys := []string{holdings.AnnotationTarget}
	onWas := holdings.Live(map[string]string{
		holdings.AnnotationIPs: "192.0.2.7," + was, holdings.AnnotationManagedIPs: was,
		holdings.AnnotationTarget: was, holdings.AnnotationManagedTarget: was, holdings.AnnotationManagedTargetKeys: holdings.AnnotationTarget,
	}, keys)
	none := holdings.Live(map[string]string{holdings.AnnotationIPs: "192.0.2.7"}, keys)
	tenant := publishedFor(map[string][]string{now: {"tenant/squat"}})
	both := []netip.Prefix{cur, prefixOld}
	tests := []struct {
		name    string
		live    holdings.Annotations
		pooled  []netip.Prefix
		ingress []string
		others  func(string) []string
		want    []string // the target
	}{
		{"published for another, the draining address the target", onWas, both, []string{"192.0.2.7", was}, tenant, []string{was}},
		{"published for another, the draining address published, no target yet", none, both, []string{"192.0.2.7", was}, tenant, []string{was}},
		{"published for another, the drain over", onWas, []netip.Prefix{cur}, []string{"192.0.2.7"}, tenant, nil},
		{"published for another, no ingress at all", none, []netip.Prefix{cur}, nil, tenant, nil},
		{"published for another, the draining address not published", onWas, both, []string{"192.0.2.7"}, tenant, nil},
		{"published for it too (a sharing key)", onWas, both, []string{"192.0.2.7", now, was}, tenant, []string{now}},
		{"published for nobody: the current address", onWas, []netip.Prefix{cur}, []string{"192.0.2.7"}, publishedFor(nil), []string{now}},
		{"nobody asked", onWas, []netip.Prefix{cur}, []string{"192.0.2.7"}, nil, []string{now}},
		{"another's draining address is not the target", none, both, []string{"192.0.2.7"}, publishedFor(map[string][]string{was: {"tenant/squat"}}), []string{now}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Service(specS, f, tt.pooled, tt.live, Served{Ingress: tt.ingress, Others: tt.others}, ServiceOptions{TargetKeys: keys})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Targets[holdings.AnnotationTarget]); diff != "" {
				t.Errorf("target (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got.ManagedTargets); diff != "" {
				t.Errorf("target record (-want +got):\n%s", diff)
			}
			if got.IPs[holdings.AnnotationIPs][1] != now {
				t.Errorf("ips %q: the Service keeps asking for %s", got.IPs[holdings.AnnotationIPs], now)
			}
		})
	}
}

// The conflict names the other (the first by name, the same every pass),
// and is none where the Service's own load balancer publishes the address.
func TestPublishedElsewhere(t *testing.T) {
	const a, b = "2001:db8:b::1", "2001:db8:b::2"
	s := Served{Ingress: []string{b}, Others: publishedFor(map[string][]string{a: {"z/late", "Gateway tenant/gw"}, b: {"tenant/shared"}})}
	got := PublishedElsewhere("default/web", []string{a, b}, s)
	want := []Conflict{{Address: a, Holder: "Gateway tenant/gw", Loser: "default/web", Published: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conflicts (-want +got):\n%s", diff)
	}
}

// The pass reads a Service's own ingress from its copy, and who else
// publishes an address from the live index: where the load balancer
// published the Service's address between the two, the index names the
// Service itself, and that is no conflict (the fresh-clone CI of stop 51
// saw web warned that its own address was published "for default/web").
func TestAnAddressPublishedForTheServiceItselfIsNoConflict(t *testing.T) {
	const a = "2001:db8:b::1"
	s := Served{Self: "default/web", Others: publishedFor(map[string][]string{a: {"default/web"}})}
	if got := PublishedElsewhere("default/web", []string{a}, s); got != nil {
		t.Errorf("conflicts %+v, want none", got)
	}
	s.Others = publishedFor(map[string][]string{a: {"default/web", "tenant/shared"}})
	if got := s.Elsewhere(a); got != "" {
		t.Errorf("Elsewhere = %q, want none: one published for the Service is the Service's, whoever shares it", got)
	}
}

// An address published for another is a ServiceAddressConflict and the
// DynamicPrefix is not Ready (its objects are not served where the writer
// put them); an ordinary conflict leaves Ready as it is (the holder is
// served).
func TestAnAddressPublishedForAnotherIsNotReady(t *testing.T) {
	dp := &api.DynamicPrefix{Spec: dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{}}}}
	m := model.Parse(dp.Name, dp.Spec)
	d := decided(t, dp, "v1;eth0=2001:db8:a::/64 p ra", t0)
	asked := Conflict{Address: "2001:db8:a::1", Holder: "default/web", Loser: "default/copy"}
	published := Conflict{Address: "2001:db8:a::2", Holder: "tenant/squat", Loser: "default/api", Published: true}
	for _, tt := range []struct {
		name      string
		conflicts []Conflict
		reason    string
		ready     metav1.ConditionStatus
		says      []string
		not       string
	}{
		{"asked for by two", []Conflict{asked}, ServiceAddressConflict, metav1.ConditionTrue, []string{"default/copy gets none", "its own dynamic-prefix.io/suffix"}, ""},
		{"published for another", []Conflict{published}, ReasonPublishedElsewhere, metav1.ConditionFalse,
			[]string{"2001:db8:a::2 is renumber's address for default/api, but a load balancer publishes it for tenant/squat"}, "dynamic-prefix.io/suffix"},
		{"both", []Conflict{asked, published}, ReasonPublishedElsewhere, metav1.ConditionFalse, []string{"default/copy gets none", "publishes it for tenant/squat", "its own dynamic-prefix.io/suffix"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := Status(dp, m, d, Problems{Conflicts: tt.conflicts}, t0)
			c := meta.FindStatusCondition(st.Conditions, ServiceAddressConflict)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != tt.reason {
				t.Fatalf("condition %+v, want True %s", c, tt.reason)
			}
			for _, s := range tt.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q does not say %q", c.Message, s)
				}
			}
			if tt.not != "" && strings.Contains(c.Message, tt.not) {
				t.Errorf("message %q says %q", c.Message, tt.not)
			}
			if r := meta.FindStatusCondition(st.Conditions, Ready); r == nil || r.Status != tt.ready {
				t.Errorf("Ready %+v, want %s", r, tt.ready)
			}
		})
	}
}
