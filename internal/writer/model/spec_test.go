package model

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
)

var cur = netip.MustParsePrefix("2001:db8:b::/64")

func ptr[T any](v T) *T { return &v }

func TestParseDefaults(t *testing.T) {
	m := Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{}}})
	want := Model{Name: "home", RA: true, GlobalOnly: true, MinLength: 64, MaxLength: 64, Quorum: 1, MaxHistory: 2}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		spec    dynamicprefix.Spec
		check   func(Model) bool
		invalid bool
	}{
		{"RA disabled", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{Enabled: ptr(false)}}},
			func(m Model) bool { return !m.RA }, false},
		{"DHCPv6-PD only", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}},
			func(m Model) bool { return m.DHCPv6PD && !m.RA }, false},
		{"trustClientAfter read", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan", TrustClientAfter: "90m"}}},
			func(m Model) bool { return m.PDTrustAfter == 90*time.Minute }, false},
		{"trustClientAfter under a minute", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan", TrustClientAfter: "30s"}}},
			func(m Model) bool { return m.PDTrustAfter == 0 }, true},
		{"trustClientAfter garbage", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan", TrustClientAfter: "soon"}}},
			func(m Model) bool { return m.PDTrustAfter == 0 }, true},
		{"trustClientAfter in mode host", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan", Mode: "host", TrustClientAfter: "1h"}}},
			func(m Model) bool { return m.PDTrustAfter == 0 }, true},
		{"quorum 0 means 1", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{Quorum: ptr(0)}},
			func(m Model) bool { return m.Quorum == 1 }, false},
		{"history capped at 10", dynamicprefix.Spec{Transition: &dynamicprefix.Transition{Mode: "ha", MaxPrefixHistory: 50}},
			func(m Model) bool { return m.MaxHistory == 10 && m.HA }, false},
		{"filter off", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{PrefixFilter: &dynamicprefix.PrefixFilter{RequireGlobalUnicast: ptr(false)}}},
			func(m Model) bool { return !m.GlobalOnly }, false},
		{"allowed prefixes masked", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{PrefixFilter: &dynamicprefix.PrefixFilter{AllowedPrefixes: []string{"2001:db8:a::1/48"}}}},
			func(m Model) bool { return len(m.Allowed) == 1 && m.Allowed[0].String() == "2001:db8:a::/48" }, false},
		{"garbage allowed prefix", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{PrefixFilter: &dynamicprefix.PrefixFilter{AllowedPrefixes: []string{"nope"}}}},
			func(m Model) bool { return m.Allowed != nil && len(m.Allowed) == 0 }, true},
		{"range suffix not an address", dynamicprefix.Spec{AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "x", End: "::1"}}},
			func(m Model) bool { return len(m.Ranges) == 1 && !m.Ranges[0].Start.IsValid() }, true},
		{"range suffix IPv4", dynamicprefix.Spec{AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "10.0.0.1", End: "::1"}}},
			func(m Model) bool { return true }, true},
		{"subnet with BGP", dynamicprefix.Spec{Subnets: []dynamicprefix.Subnet{{Name: "s", Offset: 2, PrefixLength: 80, BGP: &dynamicprefix.BGP{Advertise: true, Community: "65000:1"}}}},
			func(m Model) bool {
				return m.Advertises() && m.Subnets[0] == Subnet{Name: "s", Offset: 2, Length: 80, Advertise: true, Community: "65000:1"}
			}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Parse("home", tt.spec)
			if !tt.check(m) {
				t.Errorf("model = %+v", m)
			}
			if got := m.Err != nil; got != tt.invalid {
				t.Errorf("Err = %v, want invalid %v", m.Err, tt.invalid)
			}
			if m.Err != nil && !errors.Is(m.Err, ErrInvalid) {
				t.Errorf("Err %v does not wrap ErrInvalid", m.Err)
			}
		})
	}
}

func TestAccept(t *testing.T) {
	allow := Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{PrefixFilter: &dynamicprefix.PrefixFilter{AllowedPrefixes: []string{"2001:db8:a::/48"}, MinPrefixLength: ptr(16)}}})
	open := Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{PrefixFilter: &dynamicprefix.PrefixFilter{RequireGlobalUnicast: ptr(false)}}})
	nothing := Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{PrefixFilter: &dynamicprefix.PrefixFilter{AllowedPrefixes: []string{"nope"}}}})
	bounded := Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{PrefixFilter: &dynamicprefix.PrefixFilter{MinPrefixLength: ptr(48), MaxPrefixLength: ptr(64)}}})
	tests := []struct {
		name   string
		m      Model
		prefix string
		want   string
	}{
		{"global unicast by default", Parse("home", dynamicprefix.Spec{}), "2001:db8:b::/64", ""},
		{"ULA refused by default", Parse("home", dynamicprefix.Spec{}), "fd00::/64", "not global unicast (outside 2000::/3)"},
		{"link-local refused", Parse("home", dynamicprefix.Spec{}), "fe80::/64", "not global unicast (outside 2000::/3)"},
		{"shorter than 2000::/3 refused", Parse("home", dynamicprefix.Spec{}), "::/0", "not global unicast (outside 2000::/3)"},
		{"ULA with the filter off", open, "fd00::/64", ""},
		{"inside the allowlist", allow, "2001:db8:a:1::/64", ""},
		{"outside the allowlist", allow, "2001:db8:b::/64", "outside allowedPrefixes"},
		{"wider than the allowlist entry", allow, "2001:db8::/32", "outside allowedPrefixes"},
		{"an allowlist of garbage allows nothing", nothing, "2001:db8:a::/64", "outside allowedPrefixes"},
		{"inside the length bounds", bounded, "2001:db8:a::/56", ""},
		{"at the bounds", bounded, "2001:db8:a::/64", ""},
		{"shorter than minPrefixLength", bounded, "2001:db8::/32", "shorter than minPrefixLength /48"},
		{"longer than maxPrefixLength", bounded, "2001:db8:a:1::/80", "longer than maxPrefixLength /64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Accept(netip.MustParsePrefix(tt.prefix)); got != tt.want {
				t.Errorf("Accept(%s) = %q, want %q", tt.prefix, got, tt.want)
			}
		})
	}
}

// Bounds the user leaves out are the acquisition's (issue 42, item 6): an
// RA's prefix is a /64, a delegation /48 to /64; 2000::/3 is never current
// unless the user asks. A bound the user sets stands, and the default beside
// it gives way to it.
func TestDefaultLengthBounds(t *testing.T) {
	ra := dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{Interface: "eth0"}}
	pd := dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}
	both := dynamicprefix.Acquisition{RouterAdvertisement: ra.RouterAdvertisement, DHCPv6PD: pd.DHCPv6PD}
	dns := dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: "router.example.net", PrefixLength: 48}}
	with := func(a dynamicprefix.Acquisition, lo, hi *int) dynamicprefix.Acquisition {
		a.PrefixFilter = &dynamicprefix.PrefixFilter{MinPrefixLength: lo, MaxPrefixLength: hi}
		return a
	}
	for _, tt := range []struct {
		name   string
		a      dynamicprefix.Acquisition
		bounds [2]int
	}{
		{"router advertisements", ra, [2]int{64, 64}},
		{"neither named: as router advertisements", dynamicprefix.Acquisition{}, [2]int{64, 64}},
		{"a delegation", pd, [2]int{48, 64}},
		{"both", both, [2]int{48, 64}},
		{"a followed name: its prefixLength", dns, [2]int{0, 0}},
		{"the user's bounds", with(ra, ptr(48), ptr(64)), [2]int{48, 64}},
		{"the user's minimum, the default maximum", with(ra, ptr(56), nil), [2]int{56, 64}},
		{"a minimum beyond the default maximum", with(pd, ptr(80), nil), [2]int{80, 80}},
		{"a maximum below the default minimum", with(ra, nil, ptr(56)), [2]int{56, 56}},
		{"the user's maximum, the default minimum", with(pd, nil, ptr(60)), [2]int{48, 60}},
		{"2000::/3 when the user asks", with(ra, ptr(3), ptr(128)), [2]int{3, 128}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := Parse("home", dynamicprefix.Spec{Acquisition: tt.a})
			if got := [2]int{m.MinLength, m.MaxLength}; got != tt.bounds {
				t.Errorf("bounds %v, want %v", got, tt.bounds)
			}
		})
	}
	for _, a := range []dynamicprefix.Acquisition{ra, pd, both} {
		if why := Parse("home", dynamicprefix.Spec{Acquisition: a}).Accept(netip.MustParsePrefix("2000::/3")); why == "" {
			t.Errorf("%+v: 2000::/3 accepted by default", a)
		}
	}
}

func TestLengthBoundsThatContradictAreAnError(t *testing.T) {
	m := Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{PrefixFilter: &dynamicprefix.PrefixFilter{MinPrefixLength: ptr(64), MaxPrefixLength: ptr(48)}}})
	if m.Err == nil {
		t.Error("minPrefixLength 64 > maxPrefixLength 48 accepted")
	}
}

func TestResolution(t *testing.T) {
	m := Parse("home", dynamicprefix.Spec{
		AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "::f000:0:0:0", End: "::ffff:ffff:ffff:ffff"}},
		Subnets:       []dynamicprefix.Subnet{{Name: "svc", Offset: 1, PrefixLength: 112}},
	})
	first, last, err := m.Range("lb", cur)
	if err != nil || first.String() != "2001:db8:b:0:f000::" || last.String() != "2001:db8:b:0:ffff:ffff:ffff:ffff" {
		t.Errorf("Range = %v %v %v", first, last, err)
	}
	if sub, err := m.Subnet("svc", cur); err != nil || sub.String() != "2001:db8:b::1:0/112" {
		t.Errorf("Subnet = %v %v", sub, err)
	}
	ranges, subnets, err := m.Derived(cur)
	if err != nil {
		t.Fatal(err)
	}
	wantR := []AddressRangeStatus{{Name: "lb", Start: "2001:db8:b:0:f000::", End: "2001:db8:b:0:ffff:ffff:ffff:ffff", CIDR: "2001:db8:b:0:f000::/68"}}
	wantS := []SubnetStatus{{Name: "svc", CIDR: "2001:db8:b::1:0/112"}}
	if diff := cmp.Diff(wantR, ranges); diff != "" {
		t.Errorf("ranges (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantS, subnets); diff != "" {
		t.Errorf("subnets (-want +got):\n%s", diff)
	}
	for _, name := range []string{"nope", ""} {
		if _, _, err := m.Range(name, cur); !errors.Is(err, ErrInvalid) {
			t.Errorf("Range(%q) err = %v, want ErrInvalid", name, err)
		}
		if _, err := m.Subnet(name, cur); !errors.Is(err, ErrInvalid) {
			t.Errorf("Subnet(%q) err = %v, want ErrInvalid", name, err)
		}
	}
}

// A range or subnet that fits one prefix may not fit another: Check says so
// for the prefix at hand, and only then.
func TestCheckDependsOnThePrefix(t *testing.T) {
	m := Parse("home", dynamicprefix.Spec{
		AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "::ffff:0:0:0", End: "::ffff:ffff:ffff:ffff"}},
		Subnets:       []dynamicprefix.Subnet{{Name: "svc", Offset: 3, PrefixLength: 64}},
	})
	if err := m.Check(netip.MustParsePrefix("2001:db8::/56")); err != nil {
		t.Errorf("a /56 fits: %v", err)
	}
	for _, p := range []string{"2001:db8::/64", "2001:db8::/63"} { // offset 3 needs 2 bits
		if err := m.Check(netip.MustParsePrefix(p)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%s) = %v, want ErrInvalid", p, err)
		}
	}
	reversed := Parse("home", dynamicprefix.Spec{AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "::ffff:0:0:0", End: "::f000:0:0:0"}}})
	if err := reversed.Check(cur); !errors.Is(err, ErrInvalid) {
		t.Errorf("start after end: %v", err)
	}
	if _, _, err := reversed.Derived(cur); err == nil {
		t.Error("Derived accepted a reversed range")
	}
}

// A /56 delegation seen as one /64 on the link: subnets and address ranges
// are carved from the /56, whichever /64 of it the router advertises; a
// subnet beyond the delegation is an error, never an address.
func TestSubnetsAndRangesAreCarvedFromTheDelegation(t *testing.T) {
	m := Parse("home", dynamicprefix.Spec{
		Acquisition:   dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: ptr(56)}},
		AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "::3:0:0:0:100", End: "::3:0:0:0:1ff"}},
		Subnets: []dynamicprefix.Subnet{
			{Name: "third", Offset: 3, PrefixLength: 64},
			{Name: "services", Offset: 0x50, PrefixLength: 120},
		},
	})
	if m.Err != nil {
		t.Fatal(m.Err)
	}
	link := netip.MustParsePrefix("2001:db8:0:12::/64")
	if got := m.Delegation(link).String(); got != "2001:db8::/56" {
		t.Errorf("Delegation = %s, want 2001:db8::/56", got)
	}
	if sub, err := m.Subnet("third", link); err != nil || sub.String() != "2001:db8:0:3::/64" {
		t.Errorf("Subnet(third) = %v %v, want 2001:db8:0:3::/64", sub, err)
	}
	if sub, err := m.Subnet("services", link); err != nil || sub.String() != "2001:db8::5000/120" {
		t.Errorf("Subnet(services) = %v %v, want 2001:db8::5000/120", sub, err)
	}
	first, last, err := m.Range("lb", link)
	if err != nil || first.String() != "2001:db8:0:3::100" || last.String() != "2001:db8:0:3::1ff" {
		t.Errorf("Range = %v %v %v", first, last, err)
	}
	// The ISP renumbers the /56: the same /64 number 3 of the new one.
	if sub, _ := m.Subnet("third", netip.MustParsePrefix("2001:db8:7:12::/64")); sub.String() != "2001:db8:7:3::/64" {
		t.Errorf("after renumbering: %s, want 2001:db8:7:3::/64", sub)
	}

	beyond := Parse("home", dynamicprefix.Spec{
		Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: ptr(56)}},
		Subnets:     []dynamicprefix.Subnet{{Name: "far", Offset: 256, PrefixLength: 64}},
	})
	if err := beyond.Check(link); !errors.Is(err, ErrInvalid) {
		t.Errorf("the 257th /64 of a /56: Check = %v, want ErrInvalid", err)
	}
}

// Without delegatedPrefixLength nothing changes: subnets are carved from the
// prefix followed; a delegation is never longer than that prefix.
func TestWithoutADelegationTheLinkPrefixIsTheDelegation(t *testing.T) {
	link := netip.MustParsePrefix("2001:db8:0:12::/64")
	if d := Parse("home", dynamicprefix.Spec{}).Delegation(link); d != link {
		t.Errorf("no delegatedPrefixLength: %s", d)
	}
	m := Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: ptr(56)}}})
	if p := netip.MustParsePrefix("2001:db8::/48"); m.Delegation(p) != p {
		t.Errorf("a /48 is its own delegation: %s", m.Delegation(p))
	}
}

func TestADelegationLengthIsBoundedAndForRouterAdvertisementsAlone(t *testing.T) {
	for _, tt := range []struct {
		name string
		acq  dynamicprefix.Acquisition
	}{
		{"too short", dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: ptr(8)}}},
		{"longer than a /64", dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: ptr(72)}}},
		{"with dhcpv6pd", dynamicprefix.Acquisition{
			RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: ptr(56)},
			DHCPv6PD:            &dynamicprefix.DHCPv6PD{Interface: "eth0"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := Parse("home", dynamicprefix.Spec{Acquisition: tt.acq})
			if !errors.Is(m.Err, ErrInvalid) || m.Delegated != 0 {
				t.Errorf("Err = %v, Delegated = %d", m.Err, m.Delegated)
			}
		})
	}
}

// allowedPrefixes bound what subnets are carved from: a delegation reaching
// outside them is an error, though the /64 on the link is inside.
func TestADelegationOutsideAllowedPrefixesIsAnError(t *testing.T) {
	m := Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{
		RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: ptr(48)},
		PrefixFilter:        &dynamicprefix.PrefixFilter{AllowedPrefixes: []string{"2001:db8:0:10::/60"}},
	}})
	link := netip.MustParsePrefix("2001:db8:0:12::/64")
	if why := m.Accept(link); why != "" {
		t.Fatalf("the link's /64 is allowed: %s", why)
	}
	if err := m.Check(link); !errors.Is(err, ErrInvalid) {
		t.Errorf("Check = %v, want ErrInvalid", err)
	}
}

// FuzzParse: any spec the API server could hand us parses without a panic, and
// every resolution against any prefix either works or says ErrInvalid.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"acquisition":{"routerAdvertisement":{}},"addressRanges":[{"name":"lb","start":"::f000:0:0:0","end":"::ffff:ffff:ffff:ffff"}],"subnets":[{"name":"s","offset":1,"prefixLength":112}]}`), "2001:db8::/64")
	f.Add([]byte(`{"acquisition":{"prefixFilter":{"allowedPrefixes":["x","2001:db8::/32"]}},"subnets":[{"name":"s","offset":-1,"prefixLength":200}]}`), "2001:db8::/48")
	f.Add([]byte(`{"acquisition":{"routerAdvertisement":{"delegatedPrefixLength":56}},"subnets":[{"name":"s","offset":3,"prefixLength":64}]}`), "2001:db8:0:12::/64")
	f.Fuzz(func(t *testing.T, raw []byte, p string) {
		var s dynamicprefix.Spec
		if json.Unmarshal(raw, &s) != nil {
			return
		}
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			return
		}
		m := Parse("home", s)
		_ = m.Accept(pfx)
		err = m.Check(pfx)
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Check: %v does not wrap ErrInvalid", err)
		}
		if _, _, derr := m.Derived(pfx); (derr == nil) != (err == nil) {
			t.Fatalf("Derived and Check disagree: %v / %v", derr, err)
		}
	})
}

func TestADNSNameIsParsedWithItsDefaults(t *testing.T) {
	m := Parse("public", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{
		Name: "Router.Example.NET", PrefixLength: 56, Servers: []string{"192.0.2.53", "[2001:db8::53]:5353", "::ffff:192.0.2.53"}}}})
	if m.Err != nil {
		t.Fatal(m.Err)
	}
	want := &DNSSource{Name: "router.example.net.", Length: 56,
		Servers:     []netip.AddrPort{netip.MustParseAddrPort("192.0.2.53:53"), netip.MustParseAddrPort("[2001:db8::53]:5353")},
		MinInterval: 10 * time.Second, MaxInterval: 10 * time.Minute}
	if diff := cmp.Diff(want, m.DNS, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("dns (-want +got):\n%s", diff)
	}
	if m.Counts("eth0", digest.SourceRA) || m.Follows("eth0") {
		t.Error("a DynamicPrefix following a name counts what nodes see on their links")
	}
}

func TestADNSSourceThatCannotBeUsedIsAnError(t *testing.T) {
	for _, tt := range []struct {
		name string
		acq  dynamicprefix.Acquisition
		want string
	}{
		{"beside router advertisements", dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{},
			DNS: &dynamicprefix.DNS{Name: "r.example", PrefixLength: 56}}, "alone"},
		{"beside DHCPv6-PD", dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"},
			DNS: &dynamicprefix.DNS{Name: "r.example", PrefixLength: 56}}, "alone"},
		{"not a name", dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: "r..example", PrefixLength: 56}}, "not a domain name"},
		{"a label too long", dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: strings.Repeat("a", 64) + ".example", PrefixLength: 56}}, "not a domain name"},
		{"a /65", dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: "r.example", PrefixLength: 65}}, "from 16 to 64"},
		{"no length", dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: "r.example"}}, "from 16 to 64"},
		{"a host name as server", dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: "r.example", PrefixLength: 56, Servers: []string{"ns.example"}}}, "neither an IP address"},
		{"port 0", dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: "r.example", PrefixLength: 56, Servers: []string{"192.0.2.1:0"}}}, "port other than 0"},
		{"six servers", dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: "r.example", PrefixLength: 56,
			Servers: []string{"::1", "::2", "::3", "::4", "::5", "::6"}}}, "at most 5"},
		{"an interval below a second", dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: "r.example", PrefixLength: 56, MinInterval: "100ms"}}, "from 1s to 24h"},
		{"an interval that is no duration", dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: "r.example", PrefixLength: 56, MaxInterval: "often"}}, "from 1s to 24h"},
		{"bounds that contradict", dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{Name: "r.example", PrefixLength: 56, MinInterval: "1h", MaxInterval: "1m"}}, "exceeds"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := Parse("public", dynamicprefix.Spec{Acquisition: tt.acq})
			if !errors.Is(m.Err, ErrInvalid) || !strings.Contains(m.Err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", m.Err, tt.want)
			}
			if m.DNS == nil || m.Counts("eth0", digest.SourceRA) {
				t.Error("a refused dns source lets the nodes' reports count")
			}
		})
	}
}

// One client per link: the first DynamicPrefix by name in mode client on
// an interface takes it, as the agents do (dhcp6.Supervisor.Set) - on the
// nodes both may run on (dhcpv6pd.nodeNames; none: every node).
func TestTheFirstByNameTakesTheLinksClient(t *testing.T) {
	pd := func(name, iface, mode string) Model {
		return Parse(name, dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: iface, Mode: mode}}})
	}
	home, lab, zoo := pd("home", "wan", ""), pd("lab", "wan", ""), pd("zoo", "wan", "")
	on := func(m Model, nodes ...string) Model { m.PDNodes = nodes; return m }
	for _, c := range []struct {
		name   string
		m      Model
		others []Model
		want   string
	}{
		{"alone", lab, nil, ""},
		{"first by name", home, []Model{lab, zoo}, ""},
		{"second", lab, []Model{zoo, home}, "home"},
		{"third: the first, not the second", zoo, []Model{lab, home}, "home"},
		{"another interface", lab, []Model{pd("home", "wan2", "")}, ""},
		{"mode host runs no agents' client", lab, []Model{pd("home", "wan", dynamicprefix.ModeHost)}, ""},
		{"in mode host itself", pd("lab", "wan", dynamicprefix.ModeHost), []Model{home}, ""},
		{"on other nodes (nodeNames apart)", on(lab, "n2"), []Model{on(home, "n1")}, ""},
		{"on a node both name", on(lab, "n2", "n3"), []Model{on(home, "n1", "n3")}, "home"},
		{"one names no nodes: every node", on(lab, "n2"), []Model{home}, "home"},
	} {
		if got := LinkTakenBy(c.m, c.others); got != c.want {
			t.Errorf("%s: taken by %q, want %q", c.name, got, c.want)
		}
	}
}
