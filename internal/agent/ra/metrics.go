package ra

import "github.com/renumber/renumber/internal/metrics"

var (
	metricReceived = metrics.NewCounterVec("renumber_agent_ra_received_total", "Valid Router Advertisements received.", "link")
	metricInvalid  = metrics.NewCounterVec("renumber_agent_ra_invalid_total", "Messages or prefix options ignored as invalid.", "link")
	metricErrors   = metrics.NewCounterVec("renumber_agent_ra_listener_errors_total", "RA listener failures (each retried with backoff).", "link")

	metricDropped = metrics.NewCounterVec("renumber_agent_ra_dropped_total", "Messages the kernel dropped from the RA socket's full queue (a flood): each drop makes the agent forget the changes waiting to be corroborated.", "link")

	metricSolicitations = metrics.NewCounterVec("renumber_agent_router_solicitations_total", "Router Solicitations sent (one when a listener opens, one per changed offer to corroborate, at most one per corroboration window).", "link")
)

// Collectors returns this package's metrics for registration.
func Collectors() []metrics.Collector {
	return []metrics.Collector{metricReceived, metricInvalid, metricErrors, metricDropped, metricSolicitations}
}
