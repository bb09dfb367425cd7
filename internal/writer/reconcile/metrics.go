package reconcile

import "github.com/renumber/renumber/internal/metrics"

var (
	metricWrites     = metrics.NewCounterVec("renumber_writer_object_writes_total", "Objects written because their rendered content changed, by resource.", "resource")
	metricErrors     = metrics.NewCounter("renumber_writer_sync_errors_total", "Sync passes that failed and were retried with backoff.")
	metricRefused    = metrics.NewCounterVec("renumber_writer_writes_refused_total", "Object writes the write-storm breaker refused, by resource.", "resource")
	metricRelists    = metrics.NewCounterVec("renumber_writer_cache_relists_total", "Caches found behind the API server and re-listed, by resource.", "resource")
	metricBadDigests = metrics.NewCounter("renumber_writer_invalid_digests_total", "Distinct garbled node digests ignored.")
)

// Collectors returns this package's metrics.
func Collectors() []metrics.Collector {
	return []metrics.Collector{metricWrites, metricErrors, metricBadDigests, metricRefused, metricRelists}
}
