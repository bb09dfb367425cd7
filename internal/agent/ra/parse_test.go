package ra

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/agent/observe"
)

var router = netip.MustParseAddr("fe80::1")

func pio(p string, valid, preferred time.Duration) *ndp.PrefixInformation {
	pp := netip.MustParsePrefix(p)
	return &ndp.PrefixInformation{PrefixLength: uint8(pp.Bits()), Prefix: pp.Addr(), OnLink: true,
		AutonomousAddressConfiguration: true, ValidLifetime: valid, PreferredLifetime: preferred}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		msg     ndp.Message
		from    netip.Addr
		hop     int
		want    []observe.RAPrefix
		bad     int
		wantErr bool
	}{
		{
			name: "global prefix, unmasked on the wire",
			msg:  &ndp.RouterAdvertisement{Options: []ndp.Option{pio("2001:db8:1::/64", time.Hour, time.Minute)}},
			from: router, hop: 255,
			want: []observe.RAPrefix{{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Valid: time.Hour, Preferred: time.Minute, Autonomous: true}},
		},
		{
			name: "withdrawn and deprecated prefixes pass through for the state to act on",
			msg: &ndp.RouterAdvertisement{Options: []ndp.Option{
				pio("2001:db8:1::/64", 0, 0), pio("2001:db8:2::/64", time.Hour, 0)}},
			from: router, hop: 255,
			want: []observe.RAPrefix{
				{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Autonomous: true},
				{Prefix: netip.MustParsePrefix("2001:db8:2::/64"), Valid: time.Hour, Autonomous: true},
			},
		},
		{
			name: "bad options are dropped, the good one kept",
			msg: &ndp.RouterAdvertisement{Options: []ndp.Option{
				&ndp.PrefixInformation{PrefixLength: 0, Prefix: netip.MustParseAddr("2001:db8::")},
				&ndp.PrefixInformation{PrefixLength: 200, Prefix: netip.MustParseAddr("2001:db8::")},
				pio("fe80::/64", time.Hour, time.Hour),
				pio("ff02::/64", time.Hour, time.Hour),
				pio("2001:db8:5::/64", time.Minute, time.Hour),
				pio("2001:db8:9::/56", time.Hour, time.Hour),
				pio("2001:db8:7::1/128", time.Hour, time.Hour),
				pio("2001:db8:7::/80", time.Hour, time.Hour),
			}},
			from: router, hop: 255,
			want: []observe.RAPrefix{{Prefix: netip.MustParsePrefix("2001:db8:9::/56"), Valid: time.Hour, Preferred: time.Hour, Autonomous: true}},
			bad:  7,
		},
		{name: "not from a link-local source", msg: &ndp.RouterAdvertisement{}, from: netip.MustParseAddr("2001:db8::1"), hop: 255, wantErr: true},
		{name: "forwarded (hop limit below 255)", msg: &ndp.RouterAdvertisement{}, from: router, hop: 254, wantErr: true},
		{name: "not an RA", msg: &ndp.RouterSolicitation{}, from: router, hop: 255, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, bad, err := Parse(tt.msg, tt.from, tt.hop)
			if tt.wantErr {
				if !errors.Is(err, ErrNotRA) {
					t.Fatalf("err = %v, want ErrNotRA", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
				t.Errorf("prefixes (-want +got):\n%s", diff)
			}
			if len(bad) != tt.bad {
				t.Errorf("%d bad options reported, want %d: %v", len(bad), tt.bad, bad)
			}
		})
	}
}

// Every validity rule of RFC 4861 6.1.2 for a Router Advertisement, on
// hand-made packets as they come off the raw socket (the kernel has already
// dropped a bad checksum).
func TestParseRawAppliesEveryValidityRule(t *testing.T) {
	good, err := ndp.MarshalMessage(&ndp.RouterAdvertisement{Options: []ndp.Option{pio("2001:db8:1::/64", time.Hour, time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		b    []byte
		from netip.Addr
		hop  int
		ok   bool
	}{
		{"valid", good, router, 255, true},
		{"source not link-local", good, netip.MustParseAddr("2001:db8::1"), 255, false},
		{"hop limit 254 (forwarded)", good, router, 254, false},
		{"ICMP code 7", edit(func(b []byte) []byte { b[1] = 7; return b }), router, 255, false},
		{"shorter than 16 octets", good[:15], router, 255, false},
		{"an option of length 0", edit(func(b []byte) []byte { b[16+1] = 0; return b }), router, 255, false},
		{"an option longer than the message", edit(func(b []byte) []byte { b[16+1] = 9; return b }), router, 255, false},
		{"not an RA (type 133)", edit(func(b []byte) []byte { b[0] = 133; return b }), router, 255, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefixes, _, err := ParseRaw(tt.b, tt.from, tt.hop)
			if tt.ok && (err != nil || len(prefixes) != 1) {
				t.Errorf("refused: %v %v", prefixes, err)
			}
			if !tt.ok && !errors.Is(err, ErrNotRA) {
				t.Errorf("accepted: %v %v", prefixes, err)
			}
		})
	}
}

// One option the parser cannot decode skips that option, not the router's
// whole RA (ndp.ParseMessage refuses an RDNSS option with no server).
func TestABadOptionSkipsTheOptionNotTheRA(t *testing.T) {
	good, err := ndp.MarshalMessage(&ndp.RouterAdvertisement{Options: []ndp.Option{pio("2001:db8:1::/64", time.Hour, time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	rdnssNoServer := []byte{25, 1, 0, 0, 0, 0, 0x0e, 0x10}                   // RFC 8106, length 1: no address
	shortPIO := []byte{3, 1, 64, 0xc0, 0, 0, 0x0e, 0x10}                     // a Prefix Information option of 8 octets
	unknown := []byte{200, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14} // a type nobody knows
	for _, tc := range []struct {
		name string
		opt  []byte
		bad  int
	}{
		{"an RDNSS option with no server", rdnssNoServer, 0},
		{"a short prefix information option", shortPIO, 1},
		{"an unknown option", unknown, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append(append(append([]byte(nil), good[:16]...), tc.opt...), good[16:]...)
			prefixes, bad, err := ParseRaw(b, router, 255)
			want := []observe.RAPrefix{{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Valid: time.Hour, Preferred: time.Minute, Autonomous: true}}
			if err != nil || len(bad) != tc.bad {
				t.Fatalf("ParseRaw: %v, bad options %v, want %d", err, bad, tc.bad)
			}
			if diff := cmp.Diff(want, prefixes, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
				t.Errorf("prefixes (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParse feeds raw ICMPv6 bytes through ndp's parser and ours: whatever
// arrives on the wire, nothing panics and every accepted prefix is usable.
func FuzzParse(f *testing.F) {
	ra := &ndp.RouterAdvertisement{Options: []ndp.Option{pio("2001:db8:1::/64", time.Hour, time.Minute)}}
	b, err := ndp.MarshalMessage(ra)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		prefixes, _, err := ParseRaw(b, router, 255)
		if err != nil {
			return
		}
		for _, p := range prefixes {
			if !p.Prefix.IsValid() || p.Prefix != p.Prefix.Masked() || p.Prefix.Bits() == 0 || p.Prefix.Bits() > MaxDelegation || p.Preferred > p.Valid {
				t.Fatalf("accepted unusable prefix %+v", p)
			}
		}
	})
}

// BenchmarkParseRA is the agent's cost of one RA off the wire: ndp's decode and
// our validation of two PIOs (a renumbering router's RA: new and deprecated).
func BenchmarkParseRA(b *testing.B) {
	ra := &ndp.RouterAdvertisement{Options: []ndp.Option{
		pio("2001:db8:2::/64", time.Hour, time.Minute), pio("2001:db8:1::/64", time.Hour, 0)}}
	wire, err := ndp.MarshalMessage(ra)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		m, err := ndp.ParseMessage(wire)
		if err != nil {
			b.Fatal(err)
		}
		if ps, _, err := Parse(m, router, 255); err != nil || len(ps) != 2 {
			b.Fatalf("%v %v", ps, err)
		}
	}
}
