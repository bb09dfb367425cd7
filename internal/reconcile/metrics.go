package reconcile

import "github.com/prometheus/client_golang/prometheus"

var (
	metricWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renumber_writer_object_writes_total", Help: "Objects written because their rendered content changed, by resource.",
	}, []string{"resource"})
	metricErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "renumber_writer_sync_errors_total", Help: "Sync passes that failed and were retried with backoff.",
	})
	metricRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renumber_writer_writes_refused_total", Help: "Object writes the write-storm breaker refused, by resource.",
	}, []string{"resource"})
	metricRelists = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renumber_writer_cache_relists_total", Help: "Caches found behind the API server and re-listed, by resource.",
	}, []string{"resource"})
	metricBadDigests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "renumber_writer_invalid_digests_total", Help: "Distinct garbled node digests ignored.",
	})
)

// Collectors returns this package's metrics.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{metricWrites, metricErrors, metricBadDigests, metricRefused, metricRelists}
}
