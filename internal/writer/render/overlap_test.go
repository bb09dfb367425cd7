package render

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

// overlapSpec is a DynamicPrefix following the RAs on link, carving
// subnets and ranges from a /delegated delegation (0: the prefix itself).
func overlapSpec(link string, delegated int, subnets []dynamicprefix.Subnet, ranges []dynamicprefix.AddressRange) dynamicprefix.Spec {
	ra := &dynamicprefix.RouterAdvertisement{Interface: link}
	if delegated > 0 {
		ra.DelegatedPrefixLength = &delegated
	}
	return dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: ra}, Subnets: subnets, AddressRanges: ranges}
}

func subnet64(offset int64) []dynamicprefix.Subnet {
	return []dynamicprefix.Subnet{{Name: "s", Offset: offset, PrefixLength: 64}}
}

func addressRange(start, end string) []dynamicprefix.AddressRange {
	return []dynamicprefix.AddressRange{{Name: "r", Start: start, End: end}}
}

func following(current string, history ...api.HistoryEntry) api.Status {
	return api.Status{CurrentPrefix: current, History: append([]api.HistoryEntry{{Prefix: current, State: model.StateActive}}, history...)}
}

// named is st with the delegations the writer names for spec's prefixes
// (namedDelegation), as its status write has them.
func named(spec dynamicprefix.Spec, st api.Status) api.Status {
	m := model.Parse("", spec)
	if p, err := netip.ParsePrefix(st.CurrentPrefix); err == nil {
		st.DelegatedPrefix = namedDelegation(m, p)
	}
	st.History = slices.Clone(st.History)
	for i, h := range st.History {
		if p, err := netip.ParsePrefix(h.Prefix); err == nil {
			st.History[i].DelegatedPrefix = namedDelegation(m, p)
		}
	}
	return st
}

// Issue 42: PrefixOverlap is True exactly when two DynamicPrefixes can hand
// out one address - on a pooled prefix, or on a subnet or range each carves
// from a delegation - never for sharing a delegation alone (two with
// subnets and ranges of their own in one /56 are what the docs ask for).
// Each side's space is computed alike: its spec, and what its status names
// pooled. Before, the other's space was its status's prefixes and
// delegation, so every two DynamicPrefixes of one /56 were reported.
func TestPrefixOverlapIsReportedOnlyWhereTwoCanHandOutOneAddress(t *testing.T) {
	// The ISP delegates 2001:db8:a::/56; the router advertises its /64
	// number 0 on eth0 and number 1 on eth1.
	const eth0, eth1 = "2001:db8:a::/64", "2001:db8:a:1::/64"
	type side struct {
		spec   dynamicprefix.Spec
		status api.Status
	}
	for _, tc := range []struct {
		name string
		a, b side
		want bool
	}{
		{"disjoint subnets of one delegation",
			side{overlapSpec("eth0", 56, subnet64(0x10), nil), following(eth0)},
			side{overlapSpec("eth1", 56, subnet64(0x20), nil), following(eth1)}, false},
		{"disjoint ranges of one delegation",
			side{overlapSpec("eth0", 56, nil, addressRange("::10:0:0:0:0", "::10:0:0:0:ffff")), following(eth0)},
			side{overlapSpec("eth1", 56, nil, addressRange("::20:0:0:0:0", "::20:0:0:0:ffff")), following(eth1)}, false},
		{"a subnet of one beside a range of the other",
			side{overlapSpec("eth0", 56, subnet64(0x10), nil), following(eth0)},
			side{overlapSpec("eth1", 56, nil, addressRange("::11:0:0:0:0", "::11:0:0:0:ffff")), following(eth1)}, false},
		{"the same subnet",
			side{overlapSpec("eth0", 56, subnet64(0x10), nil), following(eth0)},
			side{overlapSpec("eth1", 56, subnet64(0x10), nil), following(eth1)}, true},
		{"a range inside the other's subnet",
			side{overlapSpec("eth0", 56, subnet64(0x10), nil), following(eth0)},
			side{overlapSpec("eth1", 56, nil, addressRange("::10:0:0:0:100", "::10:0:0:0:1ff")), following(eth1)}, true},
		{"a subnet that is the other's pooled /64",
			side{overlapSpec("eth0", 56, subnet64(1), nil), following(eth0)},
			side{overlapSpec("eth1", 56, nil, nil), following(eth1)}, true},
		{"a /64 without delegation that is the other's subnet",
			side{overlapSpec("eth1", 0, nil, nil), following(eth1)},
			side{overlapSpec("eth0", 56, subnet64(1), nil), following(eth0)}, true},
		{"one pooled /64 (an object following either with no subnet or range lands there)",
			side{overlapSpec("eth0", 56, subnet64(0x10), nil), following(eth0)},
			side{overlapSpec("eth0", 56, subnet64(0x20), nil), following(eth0)}, true},
		{"the other's draining prefix",
			side{overlapSpec("eth0", 56, subnet64(0x10), nil), following(eth0)},
			side{overlapSpec("eth1", 56, subnet64(0x10), nil), following("2001:db8:c::/64", api.HistoryEntry{Prefix: eth1, State: model.StateDraining})}, true},
		{"one's own draining prefix",
			side{overlapSpec("eth0", 56, subnet64(0x10), nil), following("2001:db8:c::/64", api.HistoryEntry{Prefix: eth0, State: model.StateDraining})},
			side{overlapSpec("eth1", 56, subnet64(0x10), nil), following(eth1)}, true},
		{"an expired prefix",
			side{overlapSpec("eth0", 56, subnet64(0x10), nil), following(eth0)},
			side{overlapSpec("eth1", 56, subnet64(0x10), nil), following("2001:db8:c::/64", api.HistoryEntry{Prefix: eth1, State: model.StateExpired})}, false},
		{"another delegation",
			side{overlapSpec("eth0", 56, subnet64(0x10), nil), following(eth0)},
			side{overlapSpec("eth1", 56, subnet64(0x10), nil), following("2001:db8:b::/64")}, false},
		{"nothing acquired yet",
			side{overlapSpec("eth0", 56, subnet64(0x10), nil), following(eth0)},
			side{overlapSpec("eth1", 56, subnet64(0x10), nil), api.Status{}}, false},
		{"a subnet that does not fit its delegation hands out nothing",
			side{overlapSpec("eth0", 56, []dynamicprefix.Subnet{{Name: "s", PrefixLength: 48}}, nil), following(eth0)},
			side{overlapSpec("eth1", 56, nil, nil), following(eth1)}, false},
		// A CIDR-only kind (a Calico IPPool, kube-vip's cidr-* keys) holds
		// a range as its smallest covering CIDR: ::18-::27 as ::/122.
		{"ranges apart whose covering CIDRs meet",
			side{overlapSpec("eth0", 56, nil, addressRange("::10:0:0:0:18", "::10:0:0:0:27")), following(eth0)},
			side{overlapSpec("eth1", 56, nil, addressRange("::10:0:0:0:30", "::10:0:0:0:3f")), following(eth1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.a.status, tc.b.status = named(tc.a.spec, tc.a.status), named(tc.b.spec, tc.b.status)
			a := Space(model.Parse("a", tc.a.spec), StatusPooled(tc.a.status)) // as a's pass: its decision pools what its status names
			b := SpaceOf("b", &api.DynamicPrefix{Spec: tc.b.spec, Status: tc.b.status})
			if got := Overlapping(a, map[string][]netip.Prefix{"b": b}); (len(got) > 0) != tc.want {
				t.Errorf("a %v, b %v: a reports %q, want an overlap: %v", a, b, got, tc.want)
			}
			if got := Overlapping(b, map[string][]netip.Prefix{"a": a}); (len(got) > 0) != tc.want {
				t.Errorf("a %v, b %v: b reports %q, want an overlap: %v", a, b, got, tc.want)
			}
		})
	}
}

// PrefixOverlap says where two DynamicPrefixes meet - the docs promise
// "which DynamicPrefix, and what they share" - naming each place once (not
// one inside another named), at most three of them.
func TestPrefixOverlapSaysWhereTheyMeet(t *testing.T) {
	p := netip.MustParsePrefix
	mine := []netip.Prefix{p("2001:db8:a::/64"), p("2001:db8:a:10::/64"), p("2001:db8:a:20::/120")}
	got := Overlapping(mine, map[string][]netip.Prefix{
		"link":     {p("2001:db8:a::/64"), p("2001:db8:a::ff00/120")},     // one link, and a range on it
		"subnet":   {p("2001:db8:a:1::/64"), p("2001:db8:a:10::/64")},     // the same subnet
		"range":    {p("2001:db8:a:2::/64"), p("2001:db8:a:10::100/120")}, // a range inside my subnet
		"wide":     {p("2001:db8:a::/56")},                                // a /56 pooled (a delegation followed whole)
		"disjoint": {p("2001:db8:a:1::/64"), p("2001:db8:a:11::/64")},
	})
	want := []Overlap{
		{Name: "link", On: []netip.Prefix{p("2001:db8:a::/64")}},
		{Name: "range", On: []netip.Prefix{p("2001:db8:a:10::100/120")}},
		{Name: "subnet", On: []netip.Prefix{p("2001:db8:a:10::/64")}},
		{Name: "wide", On: []netip.Prefix{p("2001:db8:a::/64"), p("2001:db8:a:10::/64"), p("2001:db8:a:20::/120")}},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("Overlapping (-want +got):\n%s", diff)
	}
	four := Overlap{Name: "wide", On: []netip.Prefix{p("2001:db8:a::/64"), p("2001:db8:a:1::/64"), p("2001:db8:a:2::/64"), p("2001:db8:a:3::/64")}}
	msg := OverlapMessage([]Overlap{got[0], four})
	if want := "the addresses of DynamicPrefix link (on 2001:db8:a::/64), wide (on 2001:db8:a::/64, 2001:db8:a:1::/64, 2001:db8:a:2::/64, 1 more) overlap this one's: "; !strings.HasPrefix(msg, want) {
		t.Errorf("the message %q, want it to begin %q", msg, want)
	}
}

// A pass computes its own space from its decision's pooled prefixes, and
// the others' from what their statuses name pooled: the status it writes
// for a decision names what that decision pools, so the two are the same
// space (each sees the other as it sees itself).
func TestTheSpaceAStatusNamesIsTheSpaceOfItsDecision(t *testing.T) {
	spec := overlapSpec("eth0", 56, subnet64(0x10), addressRange("::20:0:0:0:0", "::20:0:0:0:ffff"))
	m := model.Parse("home", spec)
	history := []decide.HistoryEntry{
		{Prefix: "2001:db8:c::/64", State: model.StateActive},
		{Prefix: "2001:db8:b::/64", State: model.StateDraining},
		{Prefix: "2001:db8:a::/64", State: model.StateExpired},
	}
	d := decide.Decision{Current: netip.MustParsePrefix("2001:db8:c::/64"), History: history, Pooled: decide.Pooled(history)}
	dp := &api.DynamicPrefix{Spec: spec}
	dp.Status = Status(dp, m, d, Problems{}, time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	if diff := cmp.Diff(Space(m, d.Pooled), SpaceOf("home", dp), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("the space of the status written (-decision +status):\n%s", diff)
	}
}

// Issue 42, the property: two DynamicPrefixes are reported (either way
// round) exactly when some address could be handed out by both, checked
// address by address on small prefixes (a /116 world: /124 prefixes in
// /120 delegations, subnets and ranges of any offset and length there,
// some not fitting); and every address the writer can give a Service
// (ServiceAddress, any suffix) lies in its DynamicPrefix's space.
func FuzzSpacesOverlapExactlyWhereBothCanHandOutAnAddress(f *testing.F) {
	// side: delegated?, pooled count, pooled /124s, subnets (count, then
	// offset, length each), ranges (count, then start, end each).
	f.Add([]byte{1, 0, 0x00, 1, 1, 4, 0}, []byte{1, 0, 0x03, 1, 2, 4, 0})             // disjoint subnets of one /120
	f.Add([]byte{1, 0, 0x00, 1, 2, 4, 0}, []byte{1, 0, 0x03, 1, 2, 4, 0})             // the same subnet
	f.Add([]byte{1, 0, 0x00, 1, 2, 4, 0}, []byte{1, 0, 0x03, 0, 1, 0x24, 0x27})       // a range inside the other's subnet
	f.Add([]byte{0, 0, 0x02, 0, 0}, []byte{1, 0, 0x00, 1, 2, 4, 0})                   // a /124 without delegation, the other's subnet
	f.Add([]byte{1, 1, 0x40, 0x00, 0, 0}, []byte{1, 0, 0x03, 1, 0, 4, 0})             // a second pooled prefix (draining) is the other's subnet
	f.Add([]byte{1, 0, 0x00, 0, 1, 0x18, 0x27}, []byte{1, 0, 0x05, 0, 1, 0x30, 0x3f}) // ranges whose covering CIDRs meet
	f.Add([]byte{1, 0, 0x00, 0, 1, 0x18, 0x1f}, []byte{1, 0, 0x05, 0, 1, 0x20, 0x27}) // ranges whose covering CIDRs do not
	f.Add([]byte{0, 0, 0x00, 1, 9, 0, 1, 3, 0x20}, []byte{1, 0, 0x10, 2, 7, 4, 0, 8})
	f.Fuzz(func(t *testing.T, sa, sb []byte) {
		a, b := overlapSide(sa), overlapSide(sb)
		spaceA, spaceB := Space(a.m, a.pooled), Space(b.m, b.pooled)
		blocksA, blocksB := a.blocks(), b.blocks()
		handsOut := func(blocks []netip.Prefix, addr netip.Addr) bool {
			return slices.ContainsFunc(blocks, func(p netip.Prefix) bool { return p.Contains(addr) })
		}
		var shared netip.Addr
		for i := range 1 << 12 {
			addr := overlapWorld(i)
			inA, inB := handsOut(blocksA, addr), handsOut(blocksB, addr)
			if inA && inB && !shared.IsValid() {
				shared = addr
			}
			for _, s := range []struct {
				space []netip.Prefix
				in    bool
			}{{spaceA, inA}, {spaceB, inB}} {
				if covered := slices.ContainsFunc(s.space, func(p netip.Prefix) bool { return p.Contains(addr) }); covered != s.in {
					t.Fatalf("%s: in the space %v: %v, handed out: %v", addr, s.space, covered, s.in)
				}
			}
		}
		for _, s := range []struct {
			side  overlapCase
			space []netip.Prefix
		}{{a, spaceA}, {b, spaceB}} {
			for addr, by := range s.side.servicesGiven() {
				if !slices.ContainsFunc(s.space, func(p netip.Prefix) bool { return p.Contains(addr) }) {
					t.Fatalf("%s is given to a Service (%s), outside the space %v", addr, by, s.space)
				}
			}
		}
		ab := Overlapping(spaceA, map[string][]netip.Prefix{"b": spaceB})
		ba := Overlapping(spaceB, map[string][]netip.Prefix{"a": spaceA})
		if want := shared.IsValid(); (len(ab) > 0) != want || (len(ba) > 0) != want {
			t.Errorf("a %v, b %v: reported %q and %q; an address both hand out: %v", spaceA, spaceB, ab, ba, shared)
		}
	})
}

// overlapWorld is the i-th address of 2001:db8::/116.
func overlapWorld(i int) netip.Addr {
	b := netip.MustParseAddr("2001:db8::").As16()
	b[14], b[15] = byte(i>>8), byte(i)
	return netip.AddrFrom16(b)
}

type overlapCase struct {
	m      model.Model
	pooled []netip.Prefix
}

// overlapSide reads one DynamicPrefix of the small world from data (zeros
// past its end).
func overlapSide(data []byte) overlapCase {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	c := overlapCase{m: model.Model{Name: "side"}}
	if next()&1 == 1 {
		c.m.Delegated = 120
	}
	for range 1 + next()%2 {
		c.pooled = append(c.pooled, netip.PrefixFrom(overlapWorld(int(next())<<4), 124))
	}
	for i := range next() % 3 {
		c.m.Subnets = append(c.m.Subnets, model.Subnet{Name: string(rune('a' + i)), Offset: int64(next()), Length: 120 + int(next()%9)})
	}
	for i := range next() % 3 {
		start, end := netip.AddrFrom16([16]byte{15: next()}), netip.AddrFrom16([16]byte{15: next()})
		c.m.Ranges = append(c.m.Ranges, model.Range{Name: string(rune('a' + i)), Start: start, End: end})
	}
	return c
}

// blocks are what the pool entries of c, in any form, hold: the model's
// placements on each pooled prefix, each range as its covering CIDR.
func (c overlapCase) blocks() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range c.pooled {
		out = append(out, p)
		for _, s := range c.m.Subnets {
			if sub, err := c.m.Subnet(s.Name, p); err == nil {
				out = append(out, sub)
			}
		}
		for _, r := range c.m.Ranges {
			first, last, err := c.m.Range(r.Name, p)
			if err != nil {
				continue
			}
			if cover, err := model.Covering(first, last); err == nil {
				out = append(out, cover)
			}
		}
	}
	return out
}

// servicesGiven is every address a Service following c can be given
// (ServiceAddress: each placement, each suffix of the world's host parts),
// with the placement it is given under.
func (c overlapCase) servicesGiven() map[netip.Addr]string {
	follows := []holdings.ServiceFollow{{}}
	for _, s := range c.m.Subnets {
		follows = append(follows, holdings.ServiceFollow{Subnet: s.Name})
	}
	for _, r := range c.m.Ranges {
		follows = append(follows, holdings.ServiceFollow{Range: r.Name})
	}
	out := map[netip.Addr]string{}
	for _, p := range c.pooled {
		for _, f := range follows {
			for suffix := range 256 {
				f.Suffix = netip.AddrFrom16([16]byte{15: byte(suffix)}).String()
				if a, err := ServiceAddress(c.m, f, p); err == nil {
					out[a] = f.Subnet + f.Range + " on " + p.String()
				}
			}
		}
	}
	return out
}
