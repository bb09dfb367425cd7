package render

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

var (
	cur   = netip.MustParsePrefix("2001:db8:b::/64")
	old   = netip.MustParsePrefix("2001:db8:a::/64")
	specR = model.Parse("home", dynamicprefix.Spec{
		AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "::f000:0:0:0", End: "::ffff:ffff:ffff:ffff"}},
		Subnets:       []dynamicprefix.Subnet{{Name: "svc", Offset: 1, PrefixLength: 112}},
	})
)

func TestDesired(t *testing.T) {
	tests := []struct {
		name   string
		follow holdings.PoolFollow
		form   holdings.Form
		want   []string
	}{
		{"raw prefixes", holdings.PoolFollow{}, holdings.Any, []string{"2001:db8:b::/64", "2001:db8:a::/64"}},
		{"address range as start-stop", holdings.PoolFollow{AddressRange: "lb"}, holdings.Any,
			[]string{"2001:db8:b:0:f000::-2001:db8:b:0:ffff:ffff:ffff:ffff", "2001:db8:a:0:f000::-2001:db8:a:0:ffff:ffff:ffff:ffff"}},
		{"address range as covering CIDR", holdings.PoolFollow{AddressRange: "lb"}, holdings.CIDRs, []string{"2001:db8:b:0:f000::/68", "2001:db8:a:0:f000::/68"}},
		{"subnet", holdings.PoolFollow{Subnet: "svc"}, holdings.Any, []string{"2001:db8:b::1:0/112", "2001:db8:a::1:0/112"}},
		{"subnet as a range", holdings.PoolFollow{Subnet: "svc"}, holdings.Ranges, []string{"2001:db8:b::1:0-2001:db8:b::1:ffff", "2001:db8:a::1:0-2001:db8:a::1:ffff"}},
		{"raw prefix as a range", holdings.PoolFollow{}, holdings.Ranges, []string{"2001:db8:b::-2001:db8:b:0:ffff:ffff:ffff:ffff", "2001:db8:a::-2001:db8:a:0:ffff:ffff:ffff:ffff"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PoolEntries(specR, tt.follow, []netip.Prefix{cur, old}, tt.form)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("PoolEntries = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	for _, f := range []holdings.PoolFollow{{AddressRange: "nope"}, {Subnet: "nope"}, {AddressRange: "lb", Subnet: "svc"}} {
		if _, err := PoolEntries(specR, f, []netip.Prefix{cur}, holdings.Any); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("PoolEntries(%+v) err = %v, want model.ErrInvalid", f, err)
		}
	}
	bad := model.Parse("home", dynamicprefix.Spec{Subnets: []dynamicprefix.Subnet{{Name: "x", Offset: 1 << 20, PrefixLength: 64}}})
	if _, err := PoolEntries(bad, holdings.PoolFollow{Subnet: "x"}, []netip.Prefix{cur}, holdings.Any); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("offset outside the prefix: err = %v, want model.ErrInvalid", err)
	}
}

func TestMergeIsStableAndDoesNotLeak(t *testing.T) {
	live := []string{"192.0.2.0/24"}
	var record []string
	// Twenty rotations: the pool never grows beyond the user's entry plus current
	// and one draining prefix.
	for i := range 20 {
		pooled := []netip.Prefix{netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i + 1)}), 64)}
		if i > 0 {
			pooled = append(pooled, netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i)}), 64))
		}
		desired, err := PoolEntries(model.Parse("home", dynamicprefix.Spec{}), holdings.PoolFollow{}, pooled, holdings.Any)
		if err != nil {
			t.Fatal(err)
		}
		live, record = holdings.Merge(live, record, desired)
		again, rec2 := holdings.Merge(live, record, desired)
		if !slices.Equal(again, live) || !slices.Equal(rec2, record) {
			t.Fatalf("rotation %d: merge is not a fixed point", i)
		}
	}
	if len(live) != 3 || live[0] != "192.0.2.0/24" {
		t.Errorf("after 20 rotations: %q", live)
	}
}
