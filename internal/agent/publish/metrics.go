package publish

import "github.com/renumber/renumber/internal/metrics"

var (
	metricPublishes = metrics.NewCounter("renumber_agent_digest_publishes_total", "Digest annotation patches that succeeded.")
	metricErrors    = metrics.NewCounter("renumber_agent_digest_publish_errors_total", "Digest annotation patches that failed (retried with backoff).")
	metricLatency   = metrics.NewHistogram("renumber_agent_digest_publish_seconds", "From a change the agent saw (a Router Advertisement, a kernel address or route event) to the digest carrying it written on the Node: debounce, write budget and API server included.",
		0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
	metricThrottled = metrics.NewCounter("renumber_agent_digest_publishes_throttled_total", "Digest writes that waited for the agent's write budget (a digest changing faster than it allows).")
)

// Collectors returns this package's metrics for registration.
func Collectors() []metrics.Collector {
	return []metrics.Collector{metricPublishes, metricErrors, metricThrottled, metricLatency}
}
