package e2e

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/renumber/renumber/internal/writer/api"
)

// TestTheMappedAddressIsTheKernels: the world's router translates a ULA
// prefix on the LAN onto the ISP's prefix with Linux's own translation
// (ip6tables SNPT/DNPT for nptv6, NETMAP for netmap); a client on the WAN
// side connects to the address api.Map computes and reaches the listener on
// the ULA address inside - which sees its own ULA address, and the client's
// - before and after the ISP's prefix changes; the old address then reaches
// nothing. With a /64, the word adjusted is the interface identifier's first
// that is not 0xFFFF.
func TestTheMappedAddressIsTheKernels(t *testing.T) {
	for _, tt := range []struct {
		name, mapping string
		inside        string
		outside       [2]string
		listeners     []string
	}{
		{"nptv6 /48, RFC 6296's prefixes", api.MappingNPTv6, "fd01:203:405::/48",
			[2]string{"2001:db8:1::/48", "2001:db8:2::/48"}, []string{"fd01:203:405:1::1234"}},
		{"nptv6 /64", api.MappingNPTv6, "fd00:1:2:3::/64",
			[2]string{"2001:db8:7:3::/64", "2001:db8:8:3::/64"}, []string{"fd00:1:2:3::10", "fd00:1:2:3:ffff::10"}},
		{"netmap /56", api.MappingNetmap, "fd00:1:2::/56",
			[2]string{"2001:db8:7:100::/56", "2001:db8:8:100::/56"}, []string{"fd00:1:2:3::10"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorldWith(t, 1, false)
			ctx := t.Context()
			inside := netip.MustParsePrefix(tt.inside)
			tr, err := w.Net.Translator(ctx, tt.mapping, inside)
			if err != nil {
				t.Fatal(err)
			}
			node, err := w.Net.Node("node1")
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tt.listeners {
				if err := tr.Listen(ctx, node, netip.MustParseAddr(l), 8080); err != nil {
					t.Fatal(err)
				}
			}
			var before []netip.Addr
			for _, o := range tt.outside {
				outside := netip.MustParsePrefix(o)
				if err := tr.Map(ctx, outside); err != nil {
					t.Fatal(err)
				}
				for _, l := range tt.listeners {
					ula := netip.MustParseAddr(l)
					target, err := api.Map(tt.mapping, ula, inside, outside)
					if err != nil {
						t.Fatal(err)
					}
					line, err := tr.Dial(ctx, target, 8080)
					want := "[" + ula.String() + "]:8080 [" + tr.ClientAddr.String() + "]:"
					if err != nil || !strings.HasPrefix(line, want) {
						t.Errorf("%s as %s under %s: %q, %v; want %q...", ula, target, outside, line, err, want)
					}
				}
				for _, old := range before {
					if line, err := tr.Dial(ctx, old, 8080); err == nil {
						t.Errorf("the address under the replaced prefix, %s, still reaches %q", old, line)
					}
				}
				before = before[:0]
				for _, l := range tt.listeners {
					target, _ := api.Map(tt.mapping, netip.MustParseAddr(l), inside, outside)
					before = append(before, target)
				}
			}
		})
	}
}
