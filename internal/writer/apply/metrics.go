package apply

import "github.com/renumber/renumber/internal/metrics"

var (
	metricWrites  = metrics.NewCounterVec("renumber_writer_object_writes_total", "Objects written because their rendered content changed, by resource.", "resource")
	metricRefused = metrics.NewCounterVec("renumber_writer_writes_refused_total", "Object writes the write-storm breaker refused, by resource.", "resource")
)

// Collectors returns this package's metrics.
func Collectors() []metrics.Collector { return []metrics.Collector{metricWrites, metricRefused} }
