package model

import (
	"errors"
	"net/netip"
	"testing"
)

func TestMap(t *testing.T) {
	for _, tt := range []struct {
		name, mapping, inside, from, to, want string
	}{
		// RFC 6296, Appendix B: the worked example.
		{"RFC 6296's example", MappingNPTv6, "fd01:203:405:1::1234", "fd01:203:405::/48", "2001:db8:1::/48", "2001:db8:1:d550::1234"},
		{"RFC 6296's example, back", MappingNPTv6, "2001:db8:1:d550::1234", "2001:db8:1::/48", "fd01:203:405::/48", "fd01:203:405:1::1234"},
		// A /64: the first word of the interface identifier is adjusted, by
		// fd00+1+2+3 - (2001+db8+7+3) = fd06 + ~2dc3 = fd06 + d23c = cf43.
		{"a /64", MappingNPTv6, "fd00:1:2:3::10", "fd00:1:2:3::/64", "2001:db8:7:3::/64", "2001:db8:7:3:cf43::10"},
		// ... the first that is not 0xFFFF.
		{"a /64, first word 0xFFFF", MappingNPTv6, "fd00:1:2:3:ffff::10", "fd00:1:2:3::/64", "2001:db8:7:3::/64", "2001:db8:7:3:ffff:cf43:0:10"},
		{"the same prefix", MappingNPTv6, "fd00:1:2:3::10", "fd00:1:2:3::/64", "fd00:1:2:3::/64", "fd00:1:2:3::10"},
		{"netmap", MappingNetmap, "fd00:1:2:3::10", "fd00:1:2::/56", "2001:db8:7:100::/56", "2001:db8:7:103::10"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Map(tt.mapping, netip.MustParseAddr(tt.inside), netip.MustParsePrefix(tt.from), netip.MustParsePrefix(tt.to))
			if err != nil || got.String() != tt.want {
				t.Errorf("Map = %v, %v; want %s", got, err, tt.want)
			}
			if tt.mapping == MappingNPTv6 && onesSum(got.As16())%0xffff != onesSum(netip.MustParseAddr(tt.inside).As16())%0xffff {
				t.Errorf("not checksum neutral: %04x -> %04x", onesSum(netip.MustParseAddr(tt.inside).As16()), onesSum(got.As16()))
			}
		})
	}
}

// The adjusted word comes out as 0xFFFF: it is written as 0x0000, as Linux
// does.
func TestAnAdjustedWordOfAllOnesIsZero(t *testing.T) {
	from, to := netip.MustParsePrefix("fd00::/64"), netip.MustParsePrefix("2001:db8::/64")
	adjust := onesAdd(onesSum(from.Addr().As16()), ^onesSum(to.Addr().As16()))
	// The word that the adjustment takes to 0xFFFF.
	word := onesAdd(0xffff, ^adjust)
	inside := netip.AddrFrom16([16]byte{0xfd, 0, 6: 0, 8: byte(word >> 8), 9: byte(word), 15: 1})
	got, err := Map(MappingNPTv6, inside, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if b := got.As16(); b[8] != 0 || b[9] != 0 {
		t.Errorf("%s -> %s: want the word 0000", inside, got)
	}
}

func TestMapRefusesWhatItCannotMap(t *testing.T) {
	for _, tt := range []struct{ name, mapping, inside, from, to string }{
		{"lengths differ", MappingNPTv6, "fd00::1", "fd00::/48", "2001:db8::/56"},
		{"outside the prefix", MappingNPTv6, "fd01::1", "fd00::/48", "2001:db8::/48"},
		{"longer than /64", MappingNPTv6, "fd00::1", "fd00::/80", "2001:db8::/80"},
		{"every identifier word 0xFFFF", MappingNPTv6, "fd00::ffff:ffff:ffff:ffff", "fd00::/64", "2001:db8::/64"},
		{"IPv4", MappingNetmap, "10.0.0.1", "10.0.0.0/8", "11.0.0.0/8"},
		{"unknown mapping", "nat66", "fd00::1", "fd00::/48", "2001:db8::/48"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Map(tt.mapping, netip.MustParseAddr(tt.inside), netip.MustParsePrefix(tt.from), netip.MustParsePrefix(tt.to)); !errors.Is(err, ErrInvalidPrefix) {
				t.Errorf("Map = %v, %v; want ErrInvalidPrefix", got, err)
			}
		})
	}
}

func FuzzMap(f *testing.F) {
	f.Add("nptv6", "fd01:203:405:1::1234", "fd01:203:405::/48", "2001:db8:1::/48")
	f.Add("nptv6", "fd00:0:0:ffff::1", "fd00::/48", "fd00::/48")
	f.Add("netmap", "fd00:1:2:3::10", "fd00:1:2::/56", "2001:db8:7:100::/56")
	f.Fuzz(func(t *testing.T, mapping, inside, from, to string) {
		a, err1 := netip.ParseAddr(inside)
		p, err2 := netip.ParsePrefix(from)
		q, err3 := netip.ParsePrefix(to)
		if err1 != nil || err2 != nil || err3 != nil {
			return
		}
		got, err := Map(mapping, a, p, q)
		if err != nil {
			return
		}
		if !q.Masked().Contains(got) {
			t.Fatalf("%s -> %s is outside %s", a, got, q)
		}
		if b := a.As16(); mapping == MappingNPTv6 && p.Bits() <= 48 && b[6] == 0xff && b[7] == 0xff {
			return // subnet 0xFFFF: RFC 6296 3.5 keeps it unused; it may map as 0x0000 does
		}
		back, err := Map(mapping, got, q, p)
		if err != nil || back != a.WithZone("") {
			t.Fatalf("%s -> %s -> %v, %v: not the way back", a, got, back, err)
		}
	})
}
