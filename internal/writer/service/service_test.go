package service

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/spec"
)

var (
	cur   = netip.MustParsePrefix("2001:db8:b::/64")
	old   = netip.MustParsePrefix("2001:db8:a::/64")
	model = spec.Parse("home", dynamicprefix.Spec{
		AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "::ffff:0:0:0", End: "::ffff:ffff:ffff:ffff"}},
		Subnets:       []dynamicprefix.Subnet{{Name: "svc", Offset: 1, PrefixLength: 112}},
	})
)

func TestAddress(t *testing.T) {
	tests := []struct {
		name string
		f    Follow
		want string
	}{
		{"suffix on the prefix", Follow{Suffix: "::ffff:0:1"}, "2001:db8:b::ffff:0:1"},
		{"suffix inside the address range", Follow{Suffix: "::ffff:0:0:7", Range: "lb"}, "2001:db8:b:0:ffff::7"},
		{"suffix on the subnet", Follow{Suffix: "::9", Subnet: "svc"}, "2001:db8:b::1:9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Address(model, tt.f, cur)
			if err != nil || got.String() != tt.want {
				t.Errorf("Address = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
	for _, f := range []Follow{{}, {Suffix: "nope"}, {Suffix: "::1", Range: "lb"}, {Suffix: "::1", Subnet: "x"}, {Suffix: "::1:0:0", Subnet: "svc"}} {
		if _, err := Address(model, f, cur); !errors.Is(err, spec.ErrInvalid) {
			t.Errorf("Address(%+v) err = %v, want ErrSpec", f, err)
		}
	}
}

func TestRenderHA(t *testing.T) {
	f := Follow{Suffix: "::ffff:0:1"}
	live := Annotations{
		IPs:            []string{"192.0.2.7", "2001:db8:a::ffff:0:1"},
		ManagedIPs:     []string{"2001:db8:a::ffff:0:1"},
		Targets:        []string{"lb.example.org", "2001:db8:a::ffff:0:1"},
		ManagedTargets: []string{"2001:db8:a::ffff:0:1"},
	}
	got, err := Render(model, f, []netip.Prefix{cur, old}, live)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"192.0.2.7", "2001:db8:b::ffff:0:1", "2001:db8:a::ffff:0:1"}; !slices.Equal(got.IPs, want) {
		t.Errorf("ips = %q, want user entry + current + retained %q", got.IPs, want)
	}
	if want := []string{"lb.example.org", "2001:db8:b::ffff:0:1"}; !slices.Equal(got.Targets, want) {
		t.Errorf("targets = %q, want user hostname + current only %q", got.Targets, want)
	}
	again, _ := Render(model, f, []netip.Prefix{cur, old}, got)
	if !slices.Equal(again.IPs, got.IPs) || !slices.Equal(again.Targets, got.Targets) {
		t.Error("rendering twice changes the Service")
	}
	skip := f
	skip.SkipDNS = true
	got, _ = Render(model, skip, []netip.Prefix{cur}, live)
	if !slices.Equal(got.Targets, []string{"lb.example.org"}) || len(got.ManagedTargets) != 0 {
		t.Errorf("skip-external-dns-update: targets %q record %q", got.Targets, got.ManagedTargets)
	}
}

func TestReleaseKeepsUserEntries(t *testing.T) {
	got := Release(Annotations{IPs: []string{"192.0.2.7", "2001:db8:b::1"}, ManagedIPs: []string{"2001:db8:b::1"}})
	if !slices.Equal(got.IPs, []string{"192.0.2.7"}) || got.ManagedIPs != nil {
		t.Errorf("release = %+v", got)
	}
}

func TestSplit(t *testing.T) {
	if got := Split(" 2001:db8::1, ,lb.example.org,"); !slices.Equal(got, []string{"2001:db8::1", "lb.example.org"}) {
		t.Errorf("Split = %q", got)
	}
}
