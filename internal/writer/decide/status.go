// The status as decide reads and decides it: plain values (times as
// time.Time, zero when unset), no Kubernetes type. The served status
// (api.Status, with metav1 times and conditions) is converted at the edge:
// render.Prior reads it into a Status, render.Status writes a decision's
// History back.

package decide

import (
	"net/netip"
	"time"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
)

// Status is what For reads of a DynamicPrefix's previous status.
type Status struct {
	CurrentPrefix string         // status.currentPrefix
	PrefixSource  string         // status.prefixSource
	History       []HistoryEntry // status.history
	// DHCPv6PD is status.dhcpv6pd: the roles of the agents' DHCPv6 client
	// and its confirmer (confirm.go).
	DHCPv6PD *dynamicprefix.DHCPv6PDStatus
	// Conditions are the status conditions For reads (PrefixAcquired).
	Conditions []Condition
}

// HistoryEntry is one prefix of status.history.
type HistoryEntry struct {
	Prefix string
	// AcquiredAt, DeprecatedAt and ExpiresAt (when a draining prefix
	// leaves the pools, set once at the transition) are zero when unset.
	AcquiredAt, DeprecatedAt, ExpiresAt time.Time
	State                               string // model.StateActive, StateDraining or StateExpired
}

// Condition is one status condition, as For reads it.
type Condition struct {
	Type string
	// True: its status is True (False or Unknown otherwise).
	True bool
	// LastTransitionTime is when its status last changed (zero: unknown).
	LastTransitionTime time.Time
}

// acquired returns when the PrefixAcquired condition last turned True (zero
// if it is not True or names no time).
func (s Status) acquired() time.Time {
	for _, c := range s.Conditions {
		if c.Type == PrefixAcquired {
			if c.True {
				return c.LastTransitionTime
			}
			break
		}
	}
	return time.Time{}
}

// Pooled is every prefix of history whose entries belong in the pools, in
// its order: all but the expired (Decision.Pooled; another DynamicPrefix's
// read from its status, render.StatusPooled, the same way).
func Pooled(history []HistoryEntry) []netip.Prefix {
	var out []netip.Prefix
	for _, h := range history {
		if h.State == model.StateExpired {
			continue
		}
		if p, err := netip.ParsePrefix(h.Prefix); err == nil {
			out = append(out, p)
		}
	}
	return out
}
