package ra

import "github.com/prometheus/client_golang/prometheus"

var (
	metricReceived = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renumber_agent_ra_received_total", Help: "Valid Router Advertisements received.",
	}, []string{"link"})
	metricInvalid = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renumber_agent_ra_invalid_total", Help: "Messages or prefix options ignored as invalid.",
	}, []string{"link"})
	metricErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renumber_agent_ra_listener_errors_total", Help: "RA listener failures (each retried with backoff).",
	}, []string{"link"})
)

// Collectors returns this package's metrics for registration.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{metricReceived, metricInvalid, metricErrors}
}
