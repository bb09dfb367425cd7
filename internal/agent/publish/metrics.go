package publish

import "github.com/renumber/renumber/internal/metrics"

var (
	metricPublishes = metrics.NewCounter("renumber_agent_digest_publishes_total", "Digest annotation patches that succeeded.")
	metricErrors    = metrics.NewCounter("renumber_agent_digest_publish_errors_total", "Digest annotation patches that failed (retried with backoff).")
	metricThrottled = metrics.NewCounter("renumber_agent_digest_publishes_throttled_total", "Digest writes that waited for the agent's write budget (a digest changing faster than it allows).")
)

// Collectors returns this package's metrics for registration.
func Collectors() []metrics.Collector {
	return []metrics.Collector{metricPublishes, metricErrors, metricThrottled}
}
