package reconcile

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/metrics"
)

// stateCollector reports what the caches hold at scrape time, on every replica:
// no series outlives its object, and standbys report the same as the leader.
type stateCollector struct{ r *Reconciler }

var (
	descNodes = &metrics.Desc{Name: "renumber_writer_nodes", Type: "gauge", Labels: []string{"state"},
		Help: "Nodes by digest state: reporting (valid digest), missing (no digest annotation), invalid, not-ready (not Ready past the grace: not voting)."}
	descThrottled = &metrics.Desc{Name: "renumber_writer_throttled_objects", Type: "gauge",
		Help: "Objects whose last write the write-storm breaker refused (0 when writes flow)."}
	descAcquired = &metrics.Desc{Name: "renumber_writer_dynamicprefix_acquired", Type: "gauge", Labels: []string{"name"},
		Help: "1 when the DynamicPrefix's status has a current prefix."}
)

// Collector returns the collector of cache-derived gauges.
func (r *Reconciler) Collector() metrics.Collector { return stateCollector{r} }

func (c stateCollector) Collect(w *metrics.Writer) {
	counts := map[string]float64{"reporting": 0, "missing": 0, "invalid": 0, "not-ready": 0}
	for _, o := range c.r.nodes.store().List() {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			continue
		}
		v, ok := m.Annotations[digest.Annotation]
		if !ok {
			counts["missing"]++
			continue
		}
		switch _, err := c.r.decode(m.Name, v); {
		case c.r.isLapsed(m.Name):
			counts["not-ready"]++
		case err != nil:
			counts["invalid"]++
		default:
			counts["reporting"]++
		}
	}
	for state, n := range counts {
		w.Sample(descNodes, n, state)
	}
	c.r.mu.Lock()
	throttled := len(c.r.throttled)
	c.r.mu.Unlock()
	w.Sample(descThrottled, float64(throttled))
	for _, o := range c.r.dps.store().List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		cur, _, _ := unstructured.NestedString(u.Object, "status", "currentPrefix")
		v := 0.0
		if cur != "" {
			v = 1
		}
		w.Sample(descAcquired, v, u.GetName())
	}
}
