package apply

import (
	"fmt"
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
// balancer publishes now, which no memory of the writer's gives it, is
// held (it has something published on a pooled prefix: it keeps that,
// nothing is written) or barred (nothing published there, or the writer
// gave the other the address: it loses, as a copy always did) - but for an
// address on a draining prefix of a Service's, published for one that
// asks for none of its others, which is withheld alone (red team r8 F3).
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
		tenantAsks []string // its placement's addresses; nil: web's
		given      render.Given
		want       map[string]string // who gets each address
		held       []string          // who is held, sorted
		barred     []string          // who is barred
		withheld   []string          // "address loser from holder, published"
	}{
		{name: "a new term, each published one of both: both held, each keeps its own",
			tenantPubs: []string{onA}, given: render.NewGiven(),
			want: map[string]string{onB: web.who, onA: tenant.who}, held: []string{web.who, tenant.who}},
		{name: "web's draining address published for a tenant that asks for none of its others: withheld alone",
			tenantPubs: []string{onA}, tenantAsks: []string{"2001:db8:2::7", "2001:db8:1::7"}, given: render.NewGiven(),
			want:     map[string]string{onB: web.who, "2001:db8:2::7": tenant.who, "2001:db8:1::7": tenant.who},
			withheld: []string{onA + " " + web.who + " from " + tenant.who + ", published true"}},
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
			if tc.tenantAsks != nil {
				x.ips, x.place = tc.tenantAsks, holdings.ServiceFollow{Suffix: "::7"}
			}
			asks := offer([]ask{x, web}, tc.given, m, pooled, pooled)
			now := render.NewGiven()
			var held, barred, withheld []string
			for _, x := range asks {
				x.claim(now, tc.given, m, pooled)
				if x.held.Address != "" {
					held = append(held, x.who)
				}
				if x.barred.Address != "" {
					barred = append(barred, x.who)
				}
				for _, c := range x.withheld {
					withheld = append(withheld, fmt.Sprintf("%s %s from %s, published %v", c.Address, c.Loser, c.Holder, c.Published))
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
			if diff := cmp.Diff(tc.withheld, withheld); diff != "" {
				t.Errorf("withheld (-want +got):\n%s", diff)
			}
		})
	}
}
