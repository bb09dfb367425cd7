package kernel

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/agent/observe"
)

// Only what a DHCPv6 client installs for a delegation is handed on: an
// unreachable, blackhole or prohibit route in the main table to a prefix no
// longer than /64, with the route's expiry as the valid lifetime.
func TestRouteHandsOnDelegationsOnly(t *testing.T) {
	type got struct {
		p       netip.Prefix
		valid   time.Duration
		removed bool
	}
	var seen []got
	w := &Watcher{Clock: clocktesting.NewFakeClock(time.Unix(0, 0)), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		H: Handlers{Delegated: func(p netip.Prefix, valid time.Duration, removed bool, _ time.Time) {
			seen = append(seen, got{p, valid, removed})
		}}}
	dst := func(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }
	routes := []struct {
		name    string
		r       netlink.Route
		removed bool
		want    *got
	}{
		{"unreachable with expiry", netlink.Route{Type: unix.RTN_UNREACHABLE, Table: unix.RT_TABLE_MAIN, Dst: dst("2001:db8:a00::/56"), Expires: 600}, false,
			&got{netip.MustParsePrefix("2001:db8:a00::/56"), 600 * time.Second, false}},
		{"blackhole without expiry", netlink.Route{Type: unix.RTN_BLACKHOLE, Table: unix.RT_TABLE_MAIN, Dst: dst("2001:db8:b00::/56")}, false,
			&got{netip.MustParsePrefix("2001:db8:b00::/56"), observe.Infinite, false}},
		{"removed", netlink.Route{Type: unix.RTN_PROHIBIT, Table: unix.RT_TABLE_MAIN, Dst: dst("2001:db8:c00::/60")}, true,
			&got{netip.MustParsePrefix("2001:db8:c00::/60"), observe.Infinite, true}},
		{"a unicast route", netlink.Route{Type: unix.RTN_UNICAST, Table: unix.RT_TABLE_MAIN, Dst: dst("2001:db8:d00::/56")}, false, nil},
		{"another table", netlink.Route{Type: unix.RTN_UNREACHABLE, Table: 100, Dst: dst("2001:db8:e00::/56")}, false, nil},
		{"longer than /64", netlink.Route{Type: unix.RTN_UNREACHABLE, Table: unix.RT_TABLE_MAIN, Dst: dst("2001:db8:f00::/80")}, false, nil},
		{"IPv4", netlink.Route{Type: unix.RTN_UNREACHABLE, Table: unix.RT_TABLE_MAIN, Dst: dst("192.0.2.0/24")}, false, nil},
		{"no destination", netlink.Route{Type: unix.RTN_UNREACHABLE, Table: unix.RT_TABLE_MAIN}, false, nil},
	}
	for _, tt := range routes {
		seen = nil
		w.route(tt.r, tt.removed)
		switch {
		case tt.want == nil && len(seen) != 0:
			t.Errorf("%s: handed on %+v", tt.name, seen)
		case tt.want != nil && (len(seen) != 1 || seen[0] != *tt.want):
			t.Errorf("%s: handed on %+v, want %+v", tt.name, seen, *tt.want)
		}
	}
}

// Whatever netlink hands over - any address or mask bytes, flags, scope,
// lifetimes, route type and table - the watcher never panics, hands on only
// global IPv6 addresses with non-negative lifetimes, and only delegations that
// are masked IPv6 prefixes between /1 and /64.
func FuzzKernelEvents(f *testing.F) {
	v6 := netip.MustParseAddr("2001:db8:1:100::1").AsSlice()
	full := net.CIDRMask(64, 128)
	f.Add(v6, []byte(full), uint8(unix.RT_SCOPE_UNIVERSE), uint32(unix.IFA_F_PERMANENT), uint32(300), uint32(0xffffffff), true, uint8(unix.RTN_UNREACHABLE), uint32(unix.RT_TABLE_MAIN), uint32(600), false)
	f.Add([]byte(net.ParseIP("::ffff:192.0.2.1").To16()), []byte(net.CIDRMask(24, 32)), uint8(0), uint32(unix.IFA_F_DADFAILED), uint32(0), uint32(0), false, uint8(unix.RTN_BLACKHOLE), uint32(0), uint32(0), true)
	f.Add([]byte{1, 2, 3}, []byte{0xff, 0x00, 0xff}, uint8(200), uint32(0xffffffff), uint32(0xffffffff), uint32(1), true, uint8(unix.RTN_PROHIBIT), uint32(100), uint32(0xffffffff), false)
	f.Fuzz(func(t *testing.T, ip, mask []byte, scope uint8, flags, valid, preferred uint32, added bool, rtype uint8, table, expires uint32, removed bool) {
		w := &Watcher{Clock: clocktesting.NewFakeClock(time.Unix(0, 0)), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		w.H.Addr = func(link string, a observe.Address, _ bool, _ time.Time) {
			if link != "eth0" || !a.Addr.Addr().Is6() || a.Addr.Addr().Is4In6() || a.Valid < 0 || a.Preferred < 0 {
				t.Errorf("handed on %s %+v", link, a)
			}
		}
		w.H.Delegated = func(p netip.Prefix, valid time.Duration, _ bool, _ time.Time) {
			if !p.Addr().Is6() || p.Bits() < 1 || p.Bits() > 64 || p != p.Masked() || valid < 0 {
				t.Errorf("delegation %s valid %s", p, valid)
			}
		}
		u := netlink.AddrUpdate{LinkAddress: net.IPNet{IP: ip, Mask: mask}, LinkIndex: 7, Flags: int(flags), Scope: int(scope),
			NewAddr: added, ValidLft: int(valid), PreferedLft: int(preferred)}
		w.addr(u, map[int]string{7: "eth0"})
		w.route(netlink.Route{Type: int(rtype), Table: int(table), Dst: &net.IPNet{IP: ip, Mask: mask}, Expires: int(expires)}, removed)
	})
}
