package agent

import (
	"slices"
	"time"
)

// journalConflicts logs a router's address turning contradictory on a link,
// and turning consistent again, once each, and keeps the metrics.
func (a *Agent) journalConflicts(now time.Time) {
	for _, link := range a.state.Links() {
		contradictions, crowded := a.state.Contradictions(link)
		last := a.counted[link]
		// A link watched anew starts from zero again.
		if contradictions < last[0] || crowded < last[1] {
			last = [2]uint64{}
		}
		metricContradictions.With(link).Add(contradictions - last[0])
		metricCrowded.With(link).Add(crowded - last[1])
		a.counted[link] = [2]uint64{contradictions, crowded}
		routers := a.state.Conflicts(link, now)
		was := a.conflicts[link]
		for _, r := range routers {
			if !slices.Contains(was, r) {
				a.log.Warn(link+": router advertisements from "+r.String()+" contradict each other: another host speaks from the router's address; holding the last agreed prefixes",
					"router", r)
			}
		}
		for _, r := range was {
			if !slices.Contains(routers, r) {
				a.log.Info(link+": router advertisements from "+r.String()+" agree again", "router", r)
			}
		}
		if len(routers) > 0 {
			a.conflicts[link] = routers
		} else {
			delete(a.conflicts, link)
		}
		metricConflict.With(link).Set(float64(len(routers)))
	}
	for link := range a.counted {
		if !slices.Contains(a.state.Links(), link) {
			delete(a.conflicts, link)
			delete(a.counted, link)
		}
	}
}
