package apply

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// A DynamicPrefix whose advertised /64 is part of a /56 delegation
// (delegatedPrefixLength 56) places Services on a subnet "lb" (offset 0xff,
// a /64: dynamic-prefix.io/service-subnet) or in an address range "r" of
// the delegation: their addresses lie outside the pooled /64. The
// renumbering 2001:db8:1::/64 -> 2001:db8:2::/64 with no drain makes web's
// address new; the writer gave web its address, and its placement, in its
// last pass of this term. A tenant's older Service copies web's suffix and
// placement (and records web's next address): web holds its next address
// by the placement the writer gave it (render.Given.Following), the tenant
// by nothing but its record, and web keeps it. Found by the third red team:
// the writer's memory followed the host bits only under a pooled prefix
// containing the address, so on a subnet or in a range web held nothing and
// the tenant won by its record or its age.
func TestAServiceOnASubnetKeepsItsAddressAtARenumbering(t *testing.T) {
	m := model.Model{Name: "dp", Delegated: 56, Subnets: []model.Subnet{{Name: "lb", Offset: 0xff, Length: 64}},
		Ranges: []model.Range{{Name: "r", Start: netip.MustParseAddr("::ff:0:0:0:0"), End: netip.MustParseAddr("::ff:0:0:0:ffff")}}}
	before, after := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64")
	for _, tc := range []struct {
		name   string
		follow holdings.ServiceFollow
		record bool
	}{
		// The second red team's case: web on the /64 itself.
		{"on the /64 itself, the tenant records the next address", holdings.ServiceFollow{Suffix: "::1"}, true},
		{"on a subnet, the tenant records the next address", holdings.ServiceFollow{Suffix: "::1", Subnet: "lb"}, true},
		{"on a subnet, the tenant only copies suffix and subnet", holdings.ServiceFollow{Suffix: "::1", Subnet: "lb"}, false},
		{"in a range, the tenant records the next address", holdings.ServiceFollow{Suffix: "::ff:0:0:0:1", Range: "r"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := func(p netip.Prefix) string {
				a, err := render.ServiceAddress(m, tc.follow, p)
				if err != nil {
					t.Fatal(err)
				}
				return a.String()
			}
			old, next := addr(before), addr(after) // e.g. 2001:db8:1:ff::1, 2001:db8:2:ff::1
			placed, _ := render.PlacementOf(m, tc.follow)
			given := render.Given{To: render.Claims{old: "default/web"}, Placed: map[string]render.Placement{"default/web": placed}}
			var record []string
			if tc.record {
				record = []string{next}
			}
			asks := []ask{
				{who: "default/web", namespace: "default", name: "web", created: metav1.Unix(1000, 0), ips: []string{next}, place: tc.follow,
					seen: render.Seen{Published: []string{old}, Recorded: []string{old}}},
				{who: "tenant/old", namespace: "tenant", name: "old", created: metav1.Unix(0, 0), ips: []string{next}, place: tc.follow,
					seen: render.Seen{Recorded: record}},
			}
			offer(asks, given, m, []netip.Prefix{after}, []netip.Prefix{after, before})
			claims := render.Claims{}
			for _, x := range asks {
				if c, ok := claims.Claim(x.who, x.ips); x.who == "default/web" && !ok {
					t.Fatalf("web lost %s to %s (offered %v)", c.Address, c.Holder, describe(asks))
				}
			}
		})
	}
}
