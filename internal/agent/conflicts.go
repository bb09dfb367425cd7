package agent

import (
	"slices"
	"time"
)

// journalConflicts logs a router's address turning contradictory on a link,
// and turning consistent again, once each, and keeps the metrics (the RA table's size with them:
// it is measured after a snapshot forgot what ran out).
func (a *Agent) journalConflicts(now time.Time) {
	for _, link := range a.state.Links() {
		contradictions, crowded := a.state.TakeCounts(link)
		metricContradictions.With(link).Add(contradictions)
		metricCrowded.With(link).Add(crowded)
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
		metricRAEntries.With(link).Set(float64(a.state.RAEntries(link)))
		for mode, n := range a.state.RouterAnswers(link, now) {
			metricAnswerMode.With(link, mode).Set(float64(n))
		}
	}
	for link := range a.conflicts {
		if !slices.Contains(a.state.Links(), link) {
			delete(a.conflicts, link)
		}
	}
}
