package apply

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// TestRT3AServiceOnASubnetOfTheDelegationKeepsItsAddressAtARenumbering:
// a DynamicPrefix whose advertised /64 is part of a /56 delegation
// (delegatedPrefixLength 56) with a subnet "lb" (offset 0xff, /64) that its
// Services use (dynamic-prefix.io/service-subnet): their addresses lie in
// the delegation, outside the pooled /64. The renumbering 2001:db8:1::/64 ->
// 2001:db8:2::/64 with no drain makes web's address new; the writer gave web
// 2001:db8:1:ff::1 in its last pass of this term. A tenant's older Service
// copies web's suffix and subnet (and, for good measure, records the next
// address). render.HoldOf's renumbered() looks for the host bits only under
// a POOLED prefix that contains the address, and 2001:db8:2:ff::1 is in no
// pooled /64: web holds nothing, the tenant wins by its record (or by age).
func TestRT3AServiceOnASubnetOfTheDelegationKeepsItsAddressAtARenumbering(t *testing.T) {
	m := model.Model{Name: "dp", Delegated: 56, Subnets: []model.Subnet{{Name: "lb", Offset: 0xff, Length: 64}},
		Ranges: []model.Range{{Name: "r", Start: netip.MustParseAddr("::ff:0:0:0:0"), End: netip.MustParseAddr("::ff:0:0:0:ffff")}}}
	before, after := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64")
	for _, tc := range []struct {
		name   string
		follow holdings.ServiceFollow
		record bool
	}{
		// The control: the second red team's case, which the fix closed.
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
			given := render.Given{old: "default/web"}
			var record []string
			if tc.record {
				record = []string{next}
			}
			asks := []ask{
				{who: "default/web", namespace: "default", name: "web", created: metav1.Unix(1000, 0), ips: []string{next},
					seen: render.Seen{Published: []string{old}, Recorded: []string{old}}},
				{who: "tenant/old", namespace: "tenant", name: "old", created: metav1.Unix(0, 0), ips: []string{next},
					seen: render.Seen{Recorded: record}},
			}
			offer(asks, given, []netip.Prefix{after})
			claims := render.Claims{}
			for _, x := range asks {
				if c, ok := claims.Claim(x.who, x.ips); x.who == "default/web" && !ok {
					t.Fatalf("web lost %s to %s (offered %v)", c.Address, c.Holder, describe(asks))
				}
			}
		})
	}
}
