package apply

import (
	"net/netip"
	"testing"

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
