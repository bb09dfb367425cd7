package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/digest"
)

// stateCollector reports what the caches hold at scrape time, on every replica:
// no series outlives its object, and standbys report the same as the leader.
type stateCollector struct{ r *Reconciler }

var (
	descNodes = prometheus.NewDesc("renumber_writer_nodes",
		"Nodes by digest state: reporting (valid digest), missing (no digest annotation), invalid, not-ready (not Ready past the grace: not voting).", []string{"state"}, nil)
	descThrottled = prometheus.NewDesc("renumber_writer_throttled_objects",
		"Objects whose last write the write-storm breaker refused (0 when writes flow).", nil, nil)
	descAcquired = prometheus.NewDesc("renumber_writer_dynamicprefix_acquired",
		"1 when the DynamicPrefix's status has a current prefix.", []string{"name"}, nil)
)

// Collector returns the collector of cache-derived gauges.
func (r *Reconciler) Collector() prometheus.Collector { return stateCollector{r} }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descNodes
	ch <- descThrottled
	ch <- descAcquired
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
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
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, n, state)
	}
	c.r.mu.Lock()
	throttled := len(c.r.throttled)
	c.r.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descThrottled, prometheus.GaugeValue, float64(throttled))
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
		ch <- prometheus.MustNewConstMetric(descAcquired, prometheus.GaugeValue, v, u.GetName())
	}
}
