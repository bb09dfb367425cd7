package apply

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// Red team r8 (possession, s29-possession): possessed holds an object
// whose load balancer publishes for it an address "on a prefix pooled
// now" (onAny) - and bars (releases) one with none. But pooled are the
// advertised /64s: an address on a subnet of the delegation (or in a
// range) lies on none of them. At a new term during a drain (A's
// delegation draining, B's current), web placed on subnet "lb" with ::1
// asks for lb::1 on B and on A; its load balancer publishes A's, and a
// younger tenant's own lbipam.cilium.io/ips won B's in the race at the
// load balancer (red team r6a's race). Placed on the /64, web is held:
// it keeps A's address, nothing moves, the conflict is reported
// (AddressPublishedForAnother). Placed on a subnet, web is barred -
// released, an ordinary conflict (Ready unchanged) - and loses the
// address its load balancer publishes for it: "an honest holder loses no
// address its load balancer publishes for it" fails, unseen by the fuzzer
// (its check looks only at addresses given to another).
func TestRT8APossessionHoldsAServiceOnASubnetAsOneOnThePrefix(t *testing.T) {
	m := model.Model{Name: "dp", Delegated: 56, Subnets: []model.Subnet{{Name: "lb", Offset: 0xff, Length: 64}}}
	a, b := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64")
	pooled := []netip.Prefix{b, a} // B current, A draining
	for _, tc := range []struct {
		name     string
		place    holdings.ServiceFollow
		old, cur string
	}{
		{"on the /64", holdings.ServiceFollow{Suffix: "::1"}, "2001:db8:1::1", "2001:db8:2::1"},
		{"on subnet lb", holdings.ServiceFollow{Subnet: "lb", Suffix: "::1"}, "2001:db8:1:ff::1", "2001:db8:2:ff::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			web := ask{who: "default/web", namespace: "default", name: "web", created: metav1.Unix(1000, 0),
				ips: []string{tc.cur, tc.old}, place: tc.place,
				seen: render.Seen{Published: []string{tc.old}, Recorded: []string{tc.cur, tc.old}}}
			tenant := ask{who: "tenant/t0", namespace: "tenant", name: "t0", created: metav1.Unix(2000, 0),
				ips: []string{"2001:db8:2::7", "2001:db8:1::7"}, place: holdings.ServiceFollow{Suffix: "::7"},
				seen: render.Seen{Published: []string{"2001:db8:1::7", tc.cur}}}
			asks := offer([]ask{tenant, web}, render.Given{}, m, pooled, pooled) // a new term
			now := render.NewGiven()
			for _, x := range asks {
				if c, ok := x.claim(now, render.Given{}, m, pooled); x.who == web.who && !ok {
					t.Errorf("web released (lost its claim to %s over %s, published %v): its load balancer publishes %s for it (offered %v)",
						c.Holder, c.Address, c.Published, tc.old, describe(asks))
				}
			}
			if got := now.To[tc.old]; got != web.who {
				t.Errorf("%s (published for web) kept by %q, want %q", tc.old, got, web.who)
			}
		})
	}
}

// Red team r8 F3 (and F3b, its neighbours): during a drain (A draining, B
// current) web is created - fresh: the writer never gave it an address on
// A - and a tenant's own lbipam.cilium.io/ips already took web's address
// on A while it was free; its load balancer publishes it for the tenant.
// Web asks for its address on B and on A. Possession barred it whole (its
// load balancer publishes nothing for it on the pooled space) or held it
// whole (it publishes something there): either way it got no address on B
// for the rest of the drain, and was reported as an ordinary conflict.
// Wanted: only the contested address on A is withheld (not asked for, not
// given), reported naming the tenant (AddressPublishedForAnother); web is
// given its address on B and written. The same on a subnet or in a range,
// where its load balancer publishes an address of its own on B, and at a
// new term.
func TestRT8AServiceCreatedDuringADrainKeepsItsCurrentAddress(t *testing.T) {
	m := model.Model{Name: "dp", Delegated: 56, Subnets: []model.Subnet{{Name: "lb", Offset: 0xff, Length: 64}},
		Ranges: []model.Range{{Name: "r", Start: netip.MustParseAddr("::ff:0:0:0:0"), End: netip.MustParseAddr("::ff:0:0:0:ffff")}}}
	a, b := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64")
	pooled := []netip.Prefix{b, a} // B current, A draining
	tenantPlace := holdings.ServiceFollow{Suffix: "::7"}
	withinTerm := render.NewGiven() // the writer's last pass gave the tenant its own addresses
	withinTerm.Won(m, pooled, "tenant/t0", []string{"2001:db8:2::7", "2001:db8:1::7"}, tenantPlace)
	for _, tc := range []struct {
		name      string
		place     holdings.ServiceFollow
		old, cur  string
		published []string // what web's load balancer publishes for it
		given     render.Given
	}{
		{"on the /64", holdings.ServiceFollow{Suffix: "::1"}, "2001:db8:1::1", "2001:db8:2::1", []string{"192.0.2.7"}, withinTerm},
		{"on subnet lb", holdings.ServiceFollow{Subnet: "lb", Suffix: "::1"}, "2001:db8:1:ff::1", "2001:db8:2:ff::1", nil, withinTerm},
		{"in range r", holdings.ServiceFollow{Range: "r", Suffix: "::ff:0:0:0:1"}, "2001:db8:1:ff::1", "2001:db8:2:ff::1", nil, withinTerm},
		{"its load balancer publishes an address of its own on B", holdings.ServiceFollow{Suffix: "::1"}, "2001:db8:1::1", "2001:db8:2::1",
			[]string{"2001:db8:2::5"}, withinTerm},
		{"at a new term, its address on B published for it", holdings.ServiceFollow{Suffix: "::1"}, "2001:db8:1::1", "2001:db8:2::1",
			[]string{"2001:db8:2::1"}, render.Given{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			web := ask{who: "default/web", namespace: "default", name: "web", created: metav1.Unix(3000, 0), // created during the drain
				ips: []string{tc.cur, tc.old}, place: tc.place, seen: render.Seen{Published: tc.published}}
			tenant := ask{who: "tenant/t0", namespace: "tenant", name: "t0", created: metav1.Unix(1000, 0),
				ips: []string{"2001:db8:2::7", "2001:db8:1::7"}, place: tenantPlace,
				seen: render.Seen{Published: []string{"2001:db8:1::7", tc.old}}} // tc.old: its own entry, granted while free
			asks := offer([]ask{tenant, web}, tc.given, m, pooled, pooled)
			now := render.NewGiven()
			for _, x := range asks {
				c, ok := x.claim(now, tc.given, m, pooled)
				if x.who != web.who {
					continue
				}
				if !ok {
					t.Errorf("web lost its whole claim to %s over %s (published %v): its address on B is nobody else's (offered %v)", c.Holder, c.Address, c.Published, describe(asks))
				}
				if x.held.Address != "" || x.barred.Address != "" {
					t.Errorf("web held (%+v) or barred (%+v) whole: nothing of it is written (offered %v)", x.held, x.barred, describe(asks))
				}
				want := []render.Conflict{{Address: tc.old, Holder: tenant.who, Loser: web.who, Published: true}}
				if diff := cmp.Diff(want, x.withheld); diff != "" {
					t.Errorf("withheld from web, reported (-want +got):\n%s", diff)
				}
			}
			if got := now.To[tc.cur]; got != web.who {
				t.Errorf("%s (web's address on B) given to %q, want %q", tc.cur, got, web.who)
			}
			if got := now.To[tc.old]; got == web.who {
				t.Errorf("%s (published for the tenant) given to web", tc.old)
			}
		})
	}
}
