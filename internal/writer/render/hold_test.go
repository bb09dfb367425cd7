package render

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

// Who holds an address is read from what the object's owner cannot write:
// what this writer gave (its memory, for this leader term; under a
// renumbered prefix, where the placement it gave puts it now), then what the
// load balancer publishes in the object's status, then what a controller
// echoes from its owner's spec (a Gateway's status); the owner's own record
// counts last, only against asks that nothing else tells apart.
func TestAHoldIsReadFromWhatItsOwnerCannotWrite(t *testing.T) {
	const a, b, onC, otherOnC = "2001:db8:1::1", "2001:db8:2::1", "2001:db8:3::1", "2001:db8:3::9"
	given := Claims{a: "default/web", "2001:db8:1::9": "tenant/old"}
	following := map[string][]string{"default/web": {onC}, "tenant/old": {otherOnC}}
	for _, tc := range []struct {
		name                        string
		who                         string
		ips, published, echoed, rec []string
		want                        Hold
	}{
		{"the writer gave it the address under the prefix renumbered away", "default/web", []string{onC}, []string{a}, nil, []string{a}, HeldByWriter},
		{"another's address under the new prefix is not its own renumbered", "tenant/old", []string{onC}, nil, nil, []string{onC}, HeldByRecord},
		{"its own renumbered address", "tenant/old", []string{otherOnC}, nil, nil, nil, HeldByWriter},
		{"its placement puts it on an address the writer gave another", "default/web", []string{"2001:db8:1::9"}, nil, nil, nil, HoldsNothing},
		{"its load balancer published it before the current prefix (red team r6a)", "default/web", []string{b, "2001:db8:9::1"}, []string{"2001:db8:9::1"}, nil, nil, HeldByEarlierStatus},
		{"its load balancer published, before, what its placement renumbered puts here", "default/web", []string{b}, []string{"2001:db8:9::1"}, nil, nil, HeldByEarlierStatus},
		{"its load balancer outweighs an echo of its owner's spec", "tenant/lb", []string{b}, []string{b}, []string{b}, nil, HeldByStatus},
		{"its controller echoes one its owner chose", "tenant/gw", []string{b, a}, nil, []string{a}, []string{a}, HeldByEcho},
		{"the writer gave it one of the addresses it asks for", "default/web", []string{b, a}, nil, nil, nil, HeldByWriter},
		{"the writer gave it, and its load balancer publishes it", "default/web", []string{b, a}, []string{a}, nil, []string{a}, HeldByWriter},
		{"it asks for its own address and one the writer gave another: its load balancer's rank at most", "tenant/old", []string{"2001:db8:1::9", a}, []string{"2001:db8:1::9", a}, nil, nil, HeldByStatus},
		{"another was given it: its own record and status do not outweigh that", "tenant/old", []string{b, a}, []string{b}, nil, []string{a}, HeldByStatus},
		{"its load balancer publishes one", "tenant/lb", []string{b, a}, []string{"192.0.2.7", b}, nil, nil, HeldByStatus},
		{"its load balancer publishes only addresses it no longer asks for", "tenant/lb", []string{b}, []string{a}, nil, nil, HoldsNothing},
		{"only its own record names one", "tenant/old", []string{b, a}, nil, nil, []string{a}, HeldByRecord},
		{"nothing names one", "tenant/new", []string{b, a}, nil, nil, nil, HoldsNothing},
		{"it asks for nothing", "tenant/none", nil, []string{a}, []string{a}, []string{a}, HoldsNothing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := Seen{Published: tc.published, Echoed: tc.echoed, Recorded: tc.rec}
			if slices.Contains(tc.published, "2001:db8:9::1") {
				seen.Earlier = []string{"2001:db8:9::1", b} // published on 2001:db8:9::/64, renumbered onto b's
			}
			if got := HoldOf(tc.who, tc.ips, seen, given, following[tc.who]); got != tc.want {
				t.Errorf("HoldOf = %d, want %d", got, tc.want)
			}
		})
	}
}

// What the writer gave follows the object's placement - its suffix on the
// advertised prefix, on a subnet of the delegation, or in an address range -
// onto each prefix pooled now: a Service on a subnet of a /56 delegation lies
// outside the advertised /64, and its address renumbered is its own still.
// The placement is remembered as what it resolved to (the subnet's offset
// and length, the range's bounds), so an honest rename of the subnet or
// range keeps it (red team r6a: remembered by name, it followed nowhere).
func TestWhatTheWriterGaveFollowsThePlacementItGave(t *testing.T) {
	m := model.Model{Name: "dp", Delegated: 56, Subnets: []model.Subnet{{Name: "lb", Offset: 0xff, Length: 64}},
		Ranges: []model.Range{{Name: "r", Start: netip.MustParseAddr("::ff:0:0:0:0"), End: netip.MustParseAddr("::ff:0:0:0:ffff")}}}
	renamed := m
	renamed.Subnets = []model.Subnet{{Name: "lb2", Offset: 0xff, Length: 64}}
	renamed.Ranges = []model.Range{{Name: "r2", Start: m.Ranges[0].Start, End: m.Ranges[0].End}}
	given := NewGiven()
	for who, f := range map[string]holdings.ServiceFollow{
		"default/web":  {Suffix: "::1"},
		"default/api":  {Suffix: "::2", Subnet: "lb"},
		"default/db":   {Suffix: "::ff:0:0:0:3", Range: "r"},
		"default/gone": {Suffix: "::4", Subnet: "removed"}, // a subnet the spec does not have
	} {
		if p, ok := PlacementOf(m, f); ok {
			given.Placed[who] = p
		}
	}
	pooled := []netip.Prefix{netip.MustParsePrefix("2001:db8:2::/64"), netip.MustParsePrefix("2001:db8:1::/64")}
	for _, tc := range []struct {
		who  string
		want []string
	}{
		{"default/web", []string{"2001:db8:2::1", "2001:db8:1::1"}},
		{"default/api", []string{"2001:db8:2:ff::2", "2001:db8:1:ff::2"}},
		{"default/db", []string{"2001:db8:2:ff::3", "2001:db8:1:ff::3"}},
		{"default/gone", nil},    // never resolved
		{"tenant/unplaced", nil}, // given nothing in the last pass
	} {
		t.Run(tc.who, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, given.Following(m, tc.who, pooled)); diff != "" {
				t.Errorf("Following (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, given.Following(renamed, tc.who, pooled)); diff != "" {
				t.Errorf("Following, the subnet and range renamed since (-want +got):\n%s", diff)
			}
		})
	}
}

// The writer remembers the placement a claim won with only where the claim
// holds every address that placement puts on the pooled prefixes: a claim
// of nothing (its addresses its owner's own entries, or a mapped target) or
// of part of them would carry, at the next renumbering, the placement of
// whoever holds them now.
func TestAPlacementIsRememberedOnlyForAClaimOfEveryAddressItPuts(t *testing.T) {
	m := model.Model{Name: "dp"}
	pooled := []netip.Prefix{netip.MustParsePrefix("2001:db8:2::/64"), netip.MustParsePrefix("2001:db8:1::/64")}
	place := holdings.ServiceFollow{Suffix: "::1"}
	for _, tc := range []struct {
		name string
		ips  []string
		want bool
	}{
		{"every address it puts", []string{"2001:db8:2::1", "2001:db8:1::1"}, true},
		{"nothing", nil, false},
		{"the draining address alone", []string{"2001:db8:1::1"}, false},
		{"another's address", []string{"2001:db8:2::9", "2001:db8:1::9"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGiven()
			if _, ok := g.Won(m, pooled, "tenant/old", tc.ips, place); !ok {
				t.Fatal("the claim lost with nobody else asking")
			}
			if _, got := g.Placed["tenant/old"]; got != tc.want {
				t.Errorf("placement remembered: %v, want %v", got, tc.want)
			}
		})
	}
}
