// The status as decide reads and decides it: plain values (times as
// time.Time, zero when unset), no Kubernetes type. The served status
// (api.Status, with metav1 times and conditions) is converted at the edge:
// render.Prior reads it into a Status, render.Status writes a decision's
// History back.

package decide

import (
	"time"

	"github.com/renumber/renumber/internal/dynamicprefix"
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
