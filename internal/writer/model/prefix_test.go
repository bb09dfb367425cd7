package model

import (
	"errors"
	"math"
	"net/netip"
	"testing"
)

var home = netip.MustParsePrefix("2001:db8:1:100::/56")

func TestSplice(t *testing.T) {
	tests := []struct {
		name   string
		p      string
		suffix string
		want   string
	}{
		{"host suffix onto a /64", "2001:db8:1:100::/64", "::f000:0:0:0", "2001:db8:1:100:f000::"},
		{"unmasked prefix is masked first", "2001:db8:1:100::99/64", "::1", "2001:db8:1:100::1"},
		{"suffix using the /56's subnet bits", "2001:db8:1:100::/56", "::ff:0:0:0:1", "2001:db8:1:1ff::1"},
		{"suffix that netip reads as IPv4-mapped", "2001:db8:1:100::/64", "::ffff:0:1", "2001:db8:1:100::ffff:0:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Splice(netip.MustParsePrefix(tt.p), netip.MustParseAddr(tt.suffix))
			if err != nil || got != netip.MustParseAddr(tt.want) {
				t.Errorf("Splice = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
	if _, err := Splice(netip.MustParsePrefix("2001:db8:1:100::/64"), netip.MustParseAddr("::1:0:0:0:1")); !errors.Is(err, ErrInvalidPrefix) {
		t.Errorf("suffix outside the host part: err = %v, want ErrInvalidPrefix", err)
	}
}

func TestRange(t *testing.T) {
	p := netip.MustParsePrefix("2001:db8:1:100::/64")
	first, last, err := SpliceRange(p, netip.MustParseAddr("::f000:0:0:0"), netip.MustParseAddr("::ffff:ffff:ffff:ffff"))
	if err != nil || first.String() != "2001:db8:1:100:f000::" || last.String() != "2001:db8:1:100:ffff:ffff:ffff:ffff" {
		t.Errorf("SpliceRange = %v %v %v", first, last, err)
	}
	c, err := Covering(first, last)
	if err != nil || c.String() != "2001:db8:1:100:f000::/68" {
		t.Errorf("Covering = %v %v, want 2001:db8:1:100:f000::/68", c, err)
	}
	if _, _, err := SpliceRange(p, netip.MustParseAddr("::2"), netip.MustParseAddr("::1")); !errors.Is(err, ErrInvalidPrefix) {
		t.Errorf("start after end: err = %v", err)
	}
}

func TestSubnet(t *testing.T) {
	tests := []struct {
		name   string
		offset int64
		length int
		want   string
		ok     bool
	}{
		{"first /64", 0, 64, "2001:db8:1:100::/64", true},
		{"last /64 of a /56", 255, 64, "2001:db8:1:1ff::/64", true},
		{"offset past the delegation", 256, 64, "", false},
		{"huge offset on a /128", math.MaxInt64, 128, "2001:db8:1:100:7fff:ffff:ffff:ffff/128", true},
		{"longer than 128", 0, 129, "", false},
		{"shorter than the prefix", 0, 48, "", false},
		{"negative offset", -1, 64, "", false},
		{"the prefix itself", 0, 56, "2001:db8:1:100::/56", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SubnetAt(home, tt.offset, tt.length)
			if !tt.ok {
				if !errors.Is(err, ErrInvalidPrefix) {
					t.Errorf("SubnetAt = %v, %v; want ErrInvalidPrefix", got, err)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Errorf("SubnetAt = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func FuzzArithmetic(f *testing.F) {
	f.Add([]byte{0x20, 0x01, 0x0d, 0xb8}, uint8(56), []byte{0xf0}, []byte{0xff}, int64(3), uint8(64))
	f.Fuzz(func(t *testing.T, pb []byte, bits uint8, sb, eb []byte, offset int64, length uint8) {
		var a, s, e [16]byte
		copy(a[:], pb)
		copy(s[16-min(len(sb), 16):], sb)
		copy(e[16-min(len(eb), 16):], eb)
		p := netip.PrefixFrom(netip.AddrFrom16(a), int(bits))
		if first, last, err := SpliceRange(p, netip.AddrFrom16(s), netip.AddrFrom16(e)); err == nil {
			if !p.Masked().Contains(first) || !p.Masked().Contains(last) || last.Less(first) {
				t.Fatalf("range %s-%s escapes %s", first, last, p)
			}
			c, err := Covering(first, last)
			if err != nil || !c.Contains(first) || !c.Contains(last) || c.Bits() < p.Masked().Bits() {
				t.Fatalf("covering %v of %s-%s in %s: %v", c, first, last, p, err)
			}
		}
		if sub, err := SubnetAt(p, offset, int(length)); err == nil {
			if !p.Masked().Contains(sub.Addr()) || sub.Bits() != int(length) || sub != sub.Masked() {
				t.Fatalf("subnet %s of %s escapes it", sub, p)
			}
		}
	})
}

func TestBounds(t *testing.T) {
	for p, want := range map[string][2]string{
		"2001:db8:1:100::/64":  {"2001:db8:1:100::", "2001:db8:1:100:ffff:ffff:ffff:ffff"},
		"2001:db8::1:0/112":    {"2001:db8::1:0", "2001:db8::1:ffff"},
		"2001:db8::7/128":      {"2001:db8::7", "2001:db8::7"},
		"2001:db8:1:100::5/64": {"2001:db8:1:100::", "2001:db8:1:100:ffff:ffff:ffff:ffff"},
	} {
		first, last := Bounds(netip.MustParsePrefix(p))
		if first.String() != want[0] || last.String() != want[1] {
			t.Errorf("Bounds(%s) = %s-%s, want %s-%s", p, first, last, want[0], want[1])
		}
	}
}
