package render

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/writer/model"
)

// The prefixes that handed out addresses before the current one are those
// still draining and those the previous status names that are gone - not
// the current one, nor one whose delegation meets the current one's (a /64
// moved inside one delegation: its subnets' addresses are handed out under
// both, and one published there may be new).
func TestEarlierPrefixesAreThoseBeforeTheCurrentOne(t *testing.T) {
	m := model.Model{Name: "dp", Delegated: 56}
	p := netip.MustParsePrefix
	a, b, c := p("2001:db8:1::/64"), p("2001:db8:2::/64"), p("2001:db8:3::/64")
	for _, tc := range []struct {
		name          string
		pooled, named []netip.Prefix
		want          []netip.Prefix
	}{
		{"at rest", []netip.Prefix{a}, []netip.Prefix{a}, nil},
		{"draining", []netip.Prefix{b, a}, []netip.Prefix{b, a}, []netip.Prefix{a}},
		{"gone at once, the previous status named it", []netip.Prefix{b}, []netip.Prefix{b, a}, []netip.Prefix{a}},
		{"one draining, one gone", []netip.Prefix{c, b}, []netip.Prefix{c, b, a}, []netip.Prefix{b, a}},
		{"the /64 moved inside the delegation", []netip.Prefix{p("2001:db8:1:ff::/64"), a}, []netip.Prefix{p("2001:db8:1:ff::/64"), a}, nil},
		{"nothing pooled", nil, []netip.Prefix{a}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Earlier(m, tc.pooled, tc.named), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
				t.Errorf("Earlier (-want +got):\n%s", diff)
			}
		})
	}
}

// What a load balancer published on an earlier prefix lies, renumbered,
// where the placement it was handed out for lies now: on the /64 its host
// bits, on a subnet or in a range of the delegation its bits under the
// delegation - whatever the placement's names (the writer need not
// remember them: red team r6a, a Service absent since its term began). On
// the /64 where a subnet lies too, it could be either: both. What it
// published on the current prefix is not renumbered: it may have been
// granted to a tenant's own lbipam.cilium.io/ips ahead of the writer.
func TestWhatWasPublishedBeforeTheCurrentPrefixIsRenumbered(t *testing.T) {
	m := model.Model{Name: "dp", Delegated: 56, Subnets: []model.Subnet{{Name: "lb", Offset: 0xff, Length: 64}},
		Ranges: []model.Range{{Name: "r", Start: netip.MustParseAddr("::1:0:0:0:0"), End: netip.MustParseAddr("::1:0:0:0:ffff")}}}
	p := netip.MustParsePrefix
	a, b := p("2001:db8:1::/64"), p("2001:db8:2::/64")
	for _, tc := range []struct {
		name          string
		published     []string
		pooled, named []netip.Prefix
		want          []string
	}{
		{"on the draining /64", []string{"2001:db8:1::1"}, []netip.Prefix{b, a}, []netip.Prefix{b, a}, []string{"2001:db8:1::1", "2001:db8:2::1"}},
		{"on a subnet of the draining delegation", []string{"2001:db8:1:ff::1"}, []netip.Prefix{b, a}, []netip.Prefix{b, a}, []string{"2001:db8:1:ff::1", "2001:db8:2:ff::1"}},
		{"in a range of the draining delegation", []string{"2001:db8:1:1::7"}, []netip.Prefix{b, a}, []netip.Prefix{b, a}, []string{"2001:db8:1:1::7", "2001:db8:2:1::7"}},
		{"in the delegation where the spec carves nothing", []string{"2001:db8:1:2::1"}, []netip.Prefix{b, a}, []netip.Prefix{b, a}, nil},
		{"the earlier prefix gone", []string{"2001:db8:1::1"}, []netip.Prefix{b}, []netip.Prefix{b, a}, []string{"2001:db8:1::1", "2001:db8:2::1"}},
		{"on the /64 where the subnet lay, the /64 moved: either placement", []string{"2001:db8:1:ff::1"}, []netip.Prefix{p("2001:db8:2:1::/64")}, []netip.Prefix{p("2001:db8:2:1::/64"), p("2001:db8:1:ff::/64")}, []string{"2001:db8:1:ff::1", "2001:db8:2:1::1", "2001:db8:2:ff::1"}},
		{"on the current prefix", []string{"2001:db8:2::1"}, []netip.Prefix{b, a}, []netip.Prefix{b, a}, nil},
		{"at rest", []string{"2001:db8:1::1"}, []netip.Prefix{a}, []netip.Prefix{a}, nil},
		{"outside every delegation, and IPv4", []string{"2001:db8:9::1", "192.0.2.7"}, []netip.Prefix{b, a}, []netip.Prefix{b, a}, nil},
		{"the /64 moved inside the delegation", []string{"2001:db8:1::1"}, []netip.Prefix{p("2001:db8:1:ff::/64"), a}, []netip.Prefix{p("2001:db8:1:ff::/64"), a}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Renumbered(m, tc.published, Earlier(m, tc.pooled, tc.named), tc.pooled)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Renumbered (-want +got):\n%s", diff)
			}
		})
	}
}
