package agent

import (
	"time"
)

// Read is the handler for a listener's report that every RA that arrived on
// link before at was handed over. Safe from any goroutine.
func (a *Agent) Read(link string, at time.Time) {
	a.events <- func() { a.state.Read(link, at) }
}

// Lost is the handler for a listener's report that the kernel dropped RAs
// that arrived on link before at. Safe from any goroutine.
func (a *Agent) Lost(link string, at time.Time) {
	a.events <- func() { a.state.Lost(link, at) }
}

// Reopened is the handler for a listener's report that it opened a socket on
// link at at after another closed: RAs that arrived in between went unread.
// Safe from any goroutine.
func (a *Agent) Reopened(link string, at time.Time) {
	a.events <- func() { a.state.Reopened(link, at) }
}

// lagReport is how long a window may wait for the listener to read up to its
// end before the lag is logged: longer than a burst the socket drains at once,
// short enough that a flood that holds changes back is seen.
const lagReport = 5 * time.Second

// syncReads asks the listeners of links whose windows passed but are not read
// to their end to report once they are (the windows settle then), and logs a
// lag that lasts lagReport: RAs arrive faster than the agent reads them, and
// no change is believed meanwhile. Nothing is asked while no window waits.
// It reports whether a window waits.
func (a *Agent) syncReads(now time.Time) bool {
	behind := a.state.Behind(now)
	for link, since := range behind {
		if r, ok := a.listeners[link]; ok {
			r.l.Sync()
		}
		lag := now.Sub(since)
		metricReadLag.With(link).Set(lag.Seconds())
		if lag >= lagReport && !a.lagging[link] {
			a.lagging[link] = true
			a.log.Warn(link+": router advertisements arrive faster than the agent reads them (a flood?); changes wait to be corroborated until it catches up",
				"behind", lag.Round(time.Second))
		}
	}
	for link := range a.lagging {
		if _, ok := behind[link]; !ok {
			delete(a.lagging, link)
			a.log.Info(link + ": the agent has read the router advertisements it was behind on")
		}
	}
	for _, link := range a.state.Links() {
		if _, ok := behind[link]; !ok {
			metricReadLag.With(link).Set(0)
		}
	}
	return len(behind) > 0
}
