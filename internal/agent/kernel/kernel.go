// Package kernel follows the kernel's address and link events (netlink) and hands
// the global IPv6 addresses of each link, and links coming up, to the agent.
package kernel

import (
	"log/slog"
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
