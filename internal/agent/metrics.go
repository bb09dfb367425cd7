package agent

import "github.com/renumber/renumber/internal/metrics"

var (
	metricPrefixEvents = metrics.NewCounterVec("renumber_agent_prefix_events_total", "Prefix changes seen on watched links, by kind (appeared, deprecated, preferred again, gone).", "kind")
	metricRejected     = metrics.NewCounter("renumber_agent_prefixes_rejected_total", "Prefixes seen but not reported (filtered, or over the digest's bound).")
	metricIgnored      = metrics.NewCounterVec("renumber_agent_ras_ignored_total", "Router Advertisements not believed, by link and reason (untrusted: from a router no DynamicPrefix of the link trusts).", "link", "reason")
)

// Collectors returns this package's metrics.
func Collectors() []metrics.Collector {
	return []metrics.Collector{metricPrefixEvents, metricRejected, metricIgnored}
}
