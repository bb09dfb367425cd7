package publish

import "github.com/prometheus/client_golang/prometheus"

var (
	metricPublishes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "renumber_agent_digest_publishes_total", Help: "Digest annotation patches that succeeded.",
	})
	metricErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "renumber_agent_digest_publish_errors_total", Help: "Digest annotation patches that failed (retried with backoff).",
	})
)

// Collectors returns this package's metrics for registration.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{metricPublishes, metricErrors}
}
