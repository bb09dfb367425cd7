package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

var (
	metricErrors  = metrics.NewCounter("renumber_writer_sync_errors_total", "Sync passes that failed and were retried with backoff.")
	metricLatency = metrics.NewHistogram("renumber_writer_change_seconds", "From a change of the nodes' digests seen by the leader to the objects written for it (pools, Services, advertisements, status), per DynamicPrefix: debounce, write budget and API server included. Changes that write nothing are not counted.",
		0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
)

// Collectors returns this package's metrics.
func Collectors() []metrics.Collector {
	return append(permit.Collectors(), metricErrors, metricLatency)
}

// stateCollector reports what the caches hold at scrape time, on every replica:
// no series outlives its object, and standbys report the same as the leader.
type stateCollector struct{ c *Controller }

var (
	descThrottled = &metrics.Desc{Name: "renumber_writer_throttled_objects", Type: "gauge",
		Help: "Objects whose last write the write-storm breaker refused (0 when writes flow)."}
	descAcquired = &metrics.Desc{Name: "renumber_writer_dynamicprefix_acquired", Type: "gauge", Labels: []string{"name"},
		Help: "1 when the DynamicPrefix's status has a current prefix."}
	descReady = &metrics.Desc{Name: "renumber_writer_dynamicprefix_condition", Type: "gauge", Labels: []string{"name", "condition"},
		Help: "1 while the DynamicPrefix's status condition (Ready, PoolsSynced, PrefixAcquired, Degraded) is True, 0 otherwise (the existing operator's dynamic_prefix_pools_synced, per DynamicPrefix)."}
	descUnreported = &metrics.Desc{Name: "renumber_writer_dynamicprefix_unreported", Type: "gauge", Labels: []string{"name"},
		Help: "1 while no voting node reports the DynamicPrefix's current prefix (a quiet router); it stays in the pools."}
)

// Collector returns the collector of cache-derived gauges.
func (c *Controller) Collector() metrics.Collector { return stateCollector{c} }

func (s stateCollector) Collect(w *metrics.Writer) {
	w.Sample(descThrottled, float64(s.c.breaker.Throttled()))
	for _, o := range s.c.caches.DynamicPrefixes().List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		cur, _, _ := unstructured.NestedString(u.Object, "status", "currentPrefix")
		w.Sample(descAcquired, one(cur != ""), u.GetName())
		quiet := false
		if dp, err := api.FromUnstructured(u); err == nil {
			quiet = render.QuietStatus(dp.Status)
			for _, c := range dp.Status.Conditions {
				w.Sample(descReady, one(c.Status == metav1.ConditionTrue), u.GetName(), c.Type)
			}
		}
		w.Sample(descUnreported, one(quiet), u.GetName())
	}
}

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
