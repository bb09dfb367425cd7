package agent

import "github.com/prometheus/client_golang/prometheus"

var (
	metricPrefixEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renumber_agent_prefix_events_total", Help: "Prefix changes seen on watched links, by kind (appeared, deprecated, preferred again, gone).",
	}, []string{"kind"})
	metricRejected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "renumber_agent_prefixes_rejected_total", Help: "Prefixes seen but not reported (filtered, or over the digest's bound).",
	})
)

// Collectors returns this package's metrics.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{metricPrefixEvents, metricRejected}
}
