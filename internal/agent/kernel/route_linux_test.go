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
