package digest

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestEncode(t *testing.T) {
	tests := []struct {
		name string
		in   Node
		want string
	}{
		{name: "nothing watched", in: Node{}, want: "v1"},
		{name: "link with nothing seen", in: Node{Links: []Link{{Name: "eth0"}}}, want: "v1;eth0="},
		{
			name: "one preferred prefix from both sources",
			in: Node{Links: []Link{{Name: "eth0", Prefixes: []Prefix{
				{Prefix: pfx("2001:db8:1::/64"), Sources: SourceAddr | SourceRA},
			}}}},
			want: "v1;eth0=2001:db8:1::/64 p ra+addr",
		},
		{
			name: "a delegated prefix",
			in:   Node{Links: []Link{{Name: "wan", Prefixes: []Prefix{{Prefix: pfx("2001:db8:a00::/56"), Sources: SourcePD}}}}},
			want: "v1;wan=2001:db8:a00::/56 p pd",
		},
		{
			name: "a delegation a server offered the confirmer (an agent before the offer's lifetime)",
			in:   Node{Links: []Link{{Name: "wan", Prefixes: []Prefix{{Prefix: pfx("2001:db8:a00::/56"), Sources: SourceOffer}}}}},
			want: "v1;wan=2001:db8:a00::/56 p offer",
		},
		{
			name: "an offer with the valid lifetime the server stated",
			in: Node{Links: []Link{{Name: "wan", Prefixes: []Prefix{
				{Prefix: pfx("2001:db8:a00::/56"), Valid: time.Hour + 300*time.Millisecond, Sources: SourceOffer},
			}}}},
			want: "v1;wan=2001:db8:a00::/56 p3600 offer",
		},
		{
			name: "an offer stating an infinite lifetime",
			in: Node{Links: []Link{{Name: "wan", Prefixes: []Prefix{
				{Prefix: pfx("2001:db8:a00::/56"), Valid: MaxLifetime * time.Second, Sources: SourceOffer},
			}}}},
			want: "v1;wan=2001:db8:a00::/56 p4294967295 offer",
		},
		{
			name: "a valid lifetime only an offer carries",
			in: Node{Links: []Link{{Name: "wan", Prefixes: []Prefix{
				{Prefix: pfx("2001:db8:a00::/56"), Valid: time.Hour, Sources: SourcePD},
				{Prefix: pfx("2001:db8:b00::/56"), Valid: time.Hour, Sources: SourcePD | SourceOffer},
				{Prefix: pfx("2001:db8:c00::/56"), Valid: time.Hour, Deprecated: true, Sources: SourceOffer},
			}}}},
			want: "v1;wan=2001:db8:a00::/56 p pd,2001:db8:b00::/56 p pd+offer,2001:db8:c00::/56 d offer",
		},
		{
			name: "one offer listed twice states the longer lifetime",
			in: Node{Links: []Link{{Name: "wan", Prefixes: []Prefix{
				{Prefix: pfx("2001:db8:a00::/56"), Valid: time.Minute, Sources: SourceOffer},
				{Prefix: pfx("2001:db8:a00::/56"), Valid: time.Hour, Sources: SourceOffer},
			}}}},
			want: "v1;wan=2001:db8:a00::/56 p3600 offer",
		},
		{
			name: "links and prefixes sorted, prefixes masked",
			in: Node{Links: []Link{
				{Name: "eth1", Prefixes: []Prefix{{Prefix: pfx("2001:db8:9::1/64"), Sources: SourceRA}}},
				{Name: "eth0", Prefixes: []Prefix{
					{Prefix: pfx("2001:db8:2::/64"), Deprecated: true, Remaining: 1800*time.Second + 700*time.Millisecond, Sources: SourceRA},
					{Prefix: pfx("2001:db8:1::/64"), Sources: SourceRA},
				}},
			}},
			want: "v1;eth0=2001:db8:1::/64 p ra,2001:db8:2::/64 d1800 ra;eth1=2001:db8:9::/64 p ra",
		},
		{
			name: "duplicates merge: sources combine, preferred wins",
			in: Node{Links: []Link{{Name: "eth0", Prefixes: []Prefix{
				{Prefix: pfx("2001:db8:1::/64"), Deprecated: true, Remaining: time.Minute, Sources: SourceRA},
				{Prefix: pfx("2001:db8:1::/64"), Sources: SourceAddr},
			}}}},
			want: "v1;eth0=2001:db8:1::/64 p ra+addr",
		},
		{
			name: "deprecated with unknown lifetime",
			in: Node{Links: []Link{{Name: "eth0", Prefixes: []Prefix{
				{Prefix: pfx("2001:db8:1::/64"), Deprecated: true, Sources: SourceAddr},
			}}}},
			want: "v1;eth0=2001:db8:1::/64 d addr",
		},
		{
			name: "a router conflict on one link",
			in: Node{Links: []Link{
				{Name: "eth1"},
				{Name: "eth0", Conflict: true, Prefixes: []Prefix{{Prefix: pfx("2001:db8:1::/64"), Sources: SourceRA}}},
			}},
			want: "v1;eth0 conflict=2001:db8:1::/64 p ra;eth1=",
		},
		{
			name: "remaining lifetime dropped while preferred",
			in: Node{Links: []Link{{Name: "eth0", Prefixes: []Prefix{
				{Prefix: pfx("2001:db8:1::/64"), Remaining: time.Hour, Sources: SourceRA},
			}}}},
			want: "v1;eth0=2001:db8:1::/64 p ra",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.in)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if got != tt.want {
				t.Errorf("Encode = %q, want %q", got, tt.want)
			}
			back, err := Decode(got)
			if err != nil {
				t.Fatalf("Decode(%q): %v", got, err)
			}
			if diff := cmp.Diff(tt.in.Canonical(), back, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeIsIndependentOfOrder(t *testing.T) {
	a := Node{Links: []Link{{Name: "eth0", Prefixes: []Prefix{
		{Prefix: pfx("2001:db8:1::/64"), Sources: SourceRA},
		{Prefix: pfx("2001:db8:1::/64"), Sources: SourceAddr},
		{Prefix: pfx("2001:db8:0::/48"), Sources: SourceRA},
	}}}}
	b := Node{Links: []Link{{Name: "eth0", Prefixes: []Prefix{
		{Prefix: pfx("2001:db8:0::/48"), Sources: SourceRA},
		{Prefix: pfx("2001:db8:1::/64"), Sources: SourceAddr},
		{Prefix: pfx("2001:db8:1::/64"), Sources: SourceRA},
	}}}}
	ea, _ := Encode(a)
	eb, _ := Encode(b)
	if ea != eb {
		t.Errorf("same observations, different encodings:\n%q\n%q", ea, eb)
	}
}

func TestEncodeRejects(t *testing.T) {
	many := Node{Links: []Link{{Name: "eth0"}}}
	for i := range MaxPrefixes + 1 {
		many.Links[0].Prefixes = append(many.Links[0].Prefixes, Prefix{
			Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i)}), 64), Sources: SourceRA})
	}
	tests := []struct {
		name string
		in   Node
	}{
		{"too many prefixes", many},
		{"IPv4 prefix", Node{Links: []Link{{Name: "eth0", Prefixes: []Prefix{{Prefix: pfx("192.0.2.0/24"), Sources: SourceRA}}}}}},
		{"zero length", Node{Links: []Link{{Name: "eth0", Prefixes: []Prefix{{Prefix: pfx("::/0"), Sources: SourceRA}}}}}},
		{"no source", Node{Links: []Link{{Name: "eth0", Prefixes: []Prefix{{Prefix: pfx("2001:db8::/64")}}}}}},
		{"separator in link name", Node{Links: []Link{{Name: "eth0;x"}}}},
		{"empty link name", Node{Links: []Link{{}}}},
		{"same link twice", Node{Links: []Link{{Name: "eth0"}, {Name: "eth0"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Encode(tt.in); !errors.Is(err, ErrInvalid) {
				t.Errorf("Encode error = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"other version", "v2;eth0="},
		{"garbage", "hello world"},
		{"not canonical order", "v1;eth1=;eth0="},
		{"unmasked prefix", "v1;eth0=2001:db8::1/64 p ra"},
		{"unsorted sources", "v1;eth0=2001:db8::/64 p addr+ra"},
		{"repeated source", "v1;eth0=2001:db8::/64 p ra+ra"},
		{"unknown source", "v1;eth0=2001:db8::/64 p dhcp"},
		{"bad state", "v1;eth0=2001:db8::/64 x ra"},
		{"zero lifetime", "v1;eth0=2001:db8::/64 d0 ra"},
		{"negative lifetime", "v1;eth0=2001:db8::/64 d-5 ra"},
		{"huge lifetime", "v1;eth0=2001:db8::/64 d99999999999 ra"},
		{"zone", "v1;eth0=fe80::%eth0/64 p ra"},
		{"length 129", "v1;eth0=2001:db8::/129 p ra"},
		{"IPv4", "v1;eth0=192.0.2.0/24 p ra"},
		{"missing fields", "v1;eth0=2001:db8::/64"},
		{"no equals", "v1;eth0"},
		{"trailing separator", "v1;eth0=;"},
		{"oversized", "v1;eth0=" + strings.Repeat("x", MaxBytes)},
		{"too many links", "v1" + strings.Repeat(";a=", MaxLinks+1)},
		{"conflict mark twice", "v1;eth0 conflict conflict="},
		{"conflict mark alone", "v1; conflict="},
		{"conflict mark misspelt", "v1;eth0 conflicts="},
		{"a valid lifetime on a delegation held", "v1;wan=2001:db8:a00::/56 p3600 pd"},
		{"a valid lifetime on an offer and more", "v1;wan=2001:db8:a00::/56 p3600 pd+offer"},
		{"a valid lifetime on an RA prefix", "v1;eth0=2001:db8::/64 p3600 ra"},
		{"zero valid lifetime", "v1;wan=2001:db8:a00::/56 p0 offer"},
		{"valid lifetime with a leading zero", "v1;wan=2001:db8:a00::/56 p060 offer"},
		{"valid lifetime past 2^32-1", "v1;wan=2001:db8:a00::/56 p4294967296 offer"},
		{"signed valid lifetime", "v1;wan=2001:db8:a00::/56 p+60 offer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode(tt.in); !errors.Is(err, ErrInvalid) {
				t.Errorf("Decode(%q) error = %v, want ErrInvalid", tt.in, err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{"v1", "v1;eth0=", "v1;eth0=2001:db8:1::/64 p ra+addr,2001:db8:2::/64 d1800 ra;eth1=", "v1;eth0=2001:db8::/64 d addr", "v1;eth0 conflict=2001:db8::/64 p ra",
		"v1;wan=2001:db8:a00::/56 p3600 offer", "v1;wan=2001:db8:a00::/56 p offer,2001:db8:b00::/56 p pd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Decode(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode error %v does not wrap ErrInvalid", err)
			}
			return
		}
		again, err := Encode(n)
		if err != nil {
			t.Fatalf("decoded value does not encode: %v", err)
		}
		if again != s {
			t.Fatalf("round trip changed the value: %q -> %q", s, again)
		}
	})
}
