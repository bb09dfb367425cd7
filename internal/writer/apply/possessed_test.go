package apply

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// Possession at the load balancer: an ask for an address another's load
// balancer publishes now, which no memory of the writer's gives it, is held
// (it has something published on a pooled prefix: it keeps that, nothing
// is written) or barred (nothing published there, or the writer gave the
// other the address: it loses, as a copy always did).
func TestAnAddressPublishedForAnotherIsNotTakenWithoutTheWritersMemory(t *testing.T) {
	m := model.Model{Name: "dp", Delegated: 56}
	a, b := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64")
	pooled := []netip.Prefix{b, a}
	const onA, onB = "2001:db8:1::1", "2001:db8:2::1"
	place := holdings.ServiceFollow{Suffix: "::1"}
	web := ask{who: "default/web", namespace: "default", name: "web", created: metav1.Unix(1000, 0),
		ips: []string{onB, onA}, place: place, seen: render.Seen{Published: []string{onB}}}
	tenant := ask{who: "tenant/t0", namespace: "tenant", name: "t0", created: metav1.Unix(1, 0), // older
		ips: []string{onB, onA}, place: place}
	webGiven := render.NewGiven()
	webGiven.To[onB], webGiven.To[onA] = web.who, web.who
	for _, tc := range []struct {
		name       string
		tenantPubs []string
		given      render.Given
		want       map[string]string // who gets each address
		held       []string          // who is held, sorted
		barred     []string          // who is barred
	}{
		{name: "a new term, each published one of both: both held, each keeps its own",
			tenantPubs: []string{onA}, given: render.NewGiven(),
			want: map[string]string{onB: web.who, onA: tenant.who}, held: []string{web.who, tenant.who}},
		{name: "a new term, the copier has nothing published: barred",
			given: render.NewGiven(),
			want:  map[string]string{onB: web.who, onA: web.who}, barred: []string{tenant.who}},
		{name: "within the term the writer gave web both: the tenant's copy is barred, web asks on",
			tenantPubs: []string{onA}, given: webGiven,
			want: map[string]string{onB: web.who, onA: web.who}, barred: []string{tenant.who}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := tenant
			x.seen.Published = tc.tenantPubs
			asks := offer([]ask{x, web}, tc.given, m, pooled, pooled)
			now := render.NewGiven()
			var held, barred []string
			for _, x := range asks {
				x.claim(now, tc.given, m, pooled)
				if x.held.Address != "" {
					held = append(held, x.who)
				}
				if x.barred.Address != "" {
					barred = append(barred, x.who)
				}
			}
			slices.Sort(held)
			if diff := cmp.Diff(tc.want, map[string]string(now.To)); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.held, held); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.barred, barred); diff != "" {
				t.Errorf("barred (-want +got):\n%s", diff)
			}
		})
	}
}
