// The edge between the served status and decide's plain one: decide reads
// and decides with no Kubernetes type (times as time.Time, its own
// conditions), so the metav1 times and conditions are converted here, once
// each way.

package render

import (
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
)

// Prior is st as decide.For reads it: the previous status.
func Prior(st api.Status) decide.Status {
	out := decide.Status{CurrentPrefix: st.CurrentPrefix, PrefixSource: st.PrefixSource, DHCPv6PD: st.DHCPv6PD}
	if st.History != nil {
		out.History = make([]decide.HistoryEntry, len(st.History))
	}
	for i, h := range st.History {
		out.History[i] = decide.HistoryEntry{Prefix: h.Prefix, State: h.State,
			AcquiredAt: plain(h.AcquiredAt), DeprecatedAt: plain(h.DeprecatedAt), ExpiresAt: plain(h.ExpiresAt)}
	}
	if st.Conditions != nil {
		out.Conditions = make([]decide.Condition, len(st.Conditions))
	}
	for i, c := range st.Conditions {
		out.Conditions[i] = decide.Condition{Type: c.Type, True: c.Status == metav1.ConditionTrue, LastTransitionTime: c.LastTransitionTime.Time}
	}
	return out
}

// History is a decision's status.history as served, each entry naming the
// delegation its prefix is part of (none without delegatedPrefixLength):
// the writer's admission policy lets it write subnets of a draining
// prefix's delegation only while its status names it.
func History(m model.Model, history []decide.HistoryEntry) []api.HistoryEntry {
	if history == nil {
		return nil
	}
	out := make([]api.HistoryEntry, len(history))
	for i, h := range history {
		out[i] = api.HistoryEntry{Prefix: h.Prefix, State: h.State,
			AcquiredAt: served(h.AcquiredAt), DeprecatedAt: served(h.DeprecatedAt), ExpiresAt: served(h.ExpiresAt)}
		if p, err := netip.ParsePrefix(h.Prefix); err == nil {
			out[i].DelegatedPrefix = namedDelegation(m, p)
		}
	}
	return out
}

// plain is t as decide keeps it (zero: unset).
func plain(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// served is t as the status serves it (nil: unset).
func served(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}
