package apply

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// FuzzRT3ATenantTakesNoAddressOnASubnet is FuzzATenantTakesNoAddressItWasNotGiven
// within one leader term, with what that fuzzer leaves out: the
// DynamicPrefix carves subnets and a range from a /56 delegation
// (delegatedPrefixLength 56), and a Service's address is spliced onto the
// /64 the router advertises, onto a subnet, or into the range (render.
// ServiceAddress). Two honest Services - web on the /64, api on subnet "lb"
// (the 255th /64) - were given their addresses in the writer's last pass;
// then the prefix is renumbered (the old one draining, or gone at once).
// Up to three tenant objects pick any placement and suffix, any age, and
// any record of addresses under either prefix; a tenant whose address did
// not collide in the last pass was given it. Property: every honest
// Service wins its whole claim.
func FuzzRT3ATenantTakesNoAddressOnASubnet(f *testing.F) {
	f.Add([]byte{0, 0})
	f.Add([]byte{1, 1, 1, 1, 0, 0xff}) // no drain, a tenant copies api's subnet and suffix, older, records everything
	f.Add([]byte{0, 1, 1, 1, 0, 0xff})
	m := model.Model{Name: "dp", Delegated: 56,
		Subnets: []model.Subnet{{Name: "lb", Offset: 0xff, Length: 64}, {Name: "one", Offset: 1, Length: 64}},
		Ranges:  []model.Range{{Name: "r", Start: netip.MustParseAddr("::ff:0:0:0:0"), End: netip.MustParseAddr("::ff:0:0:0:ffff")}}}
	placements := []holdings.ServiceFollow{{}, {Subnet: "lb"}, {Subnet: "one"}, {Range: "r"}}
	suffixes := []string{"::1", "::2", "::3"}
	rangeSuffixes := []string{"::ff:0:0:0:1", "::ff:0:0:0:2", "::ff:0:0:0:3"}
	old, next := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64")
	follow := func(place, suffix int) holdings.ServiceFollow {
		fl := placements[place%len(placements)]
		fl.Suffix = suffixes[suffix%len(suffixes)]
		if fl.Range != "" {
			fl.Suffix = rangeSuffixes[suffix%len(rangeSuffixes)]
		}
		return fl
	}
	addrs := func(t *testing.T, fl holdings.ServiceFollow, on []netip.Prefix) []string {
		var out []string
		for _, p := range on {
			a, err := render.ServiceAddress(m, fl, p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, a.String())
		}
		return out
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		next8 := func() int {
			if len(in) == 0 {
				return 0
			}
			b := in[0]
			in = in[1:]
			return int(b)
		}
		pooledBefore := []netip.Prefix{old}
		pooled := []netip.Prefix{next, old} // renumbered: the old one draining
		if next8()%2 == 1 {
			pooled = []netip.Prefix{next} // gone at once
		}
		honest := []struct {
			who string
			fl  holdings.ServiceFollow
		}{{"default/web", follow(0, 0)}, {"default/api", follow(1, 1)}}
		given := render.Given{}
		var all []ask
		for _, h := range honest {
			for _, a := range addrs(t, h.fl, pooledBefore) {
				given[a] = h.who
			}
			before := addrs(t, h.fl, pooledBefore)
			all = append(all, ask{who: h.who, namespace: "default", name: h.who[len("default/"):], created: metav1.Unix(1000, 0),
				ips: addrs(t, h.fl, pooled), seen: render.Seen{Published: before, Recorded: before}})
		}
		candidates := slices.Concat(addrs(t, follow(0, 0), pooled), addrs(t, follow(1, 1), pooled), addrs(t, follow(0, 1), pooled))
		for i := range next8() % 4 {
			who := fmt.Sprintf("tenant/t%d", i)
			fl := follow(next8(), next8())
			x := ask{who: who, namespace: "tenant", name: fmt.Sprintf("t%d", i), created: metav1.Unix(int64(next8()%3)*900, 0), ips: addrs(t, fl, pooled)}
			rec := next8()
			for j, a := range candidates {
				if rec&(1<<j) != 0 {
					x.seen.Recorded = append(x.seen.Recorded, a)
				}
			}
			// Its own address in the last pass, where nobody held it.
			for _, a := range addrs(t, fl, pooledBefore) {
				if given[a] == "" {
					given[a] = who
				}
			}
			all = append(all, x)
		}
		slices.Reverse(all)
		offer(all, given, pooled)
		claims := render.Claims{}
		for _, x := range all {
			if c, ok := claims.Claim(x.who, x.ips); (x.who == "default/web" || x.who == "default/api") && !ok {
				t.Fatalf("honest %s lost %s to %s (pooled %v; offered %v)", x.who, c.Address, c.Holder, pooled, describe(all))
			}
		}
	})
}
