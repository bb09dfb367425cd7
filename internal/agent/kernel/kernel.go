// Package kernel follows the kernel's address, link and route events (netlink)
// and hands the global IPv6 addresses of each link, links coming up, and the
// prefixes delegated to the node to the agent.
package kernel

import (
	"log/slog"
	"net/netip"
	"time"

	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/agent/observe"
)

// Handlers receive events; each is called from the watcher's goroutine only.
type Handlers struct {
	// Addr: a global IPv6 address added (tentative ones too), refreshed or removed
	// (failing DAD counts as removal).
	Addr func(link string, a observe.Address, removed bool, at time.Time)
	// Link: a link went down, or came up (or appeared with a new index).
	Link func(link string, up bool, at time.Time)
	// Delegated: a prefix delegated to the node appeared, changed or went.
	// A DHCPv6 client on the node (host mode) installs each delegation as an
	// unreachable (or blackhole, prohibit) route in the main table, with the
	// lease's valid lifetime as the route's expiry or none. Nil: routes are
	// not followed.
	Delegated func(p netip.Prefix, valid time.Duration, removed bool, at time.Time)
}

// Watcher follows netlink until its context ends, resubscribing with backoff.
type Watcher struct {
	H     Handlers
	Clock clock.Clock
	Log   *slog.Logger
}

// lifetime converts a netlink lifetime in seconds (0xffffffff: forever).
func lifetime(secs int) time.Duration {
	if uint32(secs) == 0xffffffff {
		return observe.Infinite
	}
	return time.Duration(uint32(secs)) * time.Second
}
