// Package metrics is the handful of Prometheus metric kinds renumber uses -
// counters and gauges, with or without labels, and histograms - exposed in Prometheus's text
// format (0.0.4), and the HTTP server for them and the health checks.
//
// It replaces client_golang, whose protobuf runtime and collectors made 2.1 MB of
// the agent's 15.5 MB binary, resident as much as the rest (the agent's goal is
// 16 MiB of RSS); a scrape returns the same format, names and types.
package metrics

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Desc describes one metric family.
type Desc struct {
	Name, Help string
	Type       string // "counter", "gauge" or "histogram"
	Labels     []string
}

// Collector writes its current samples to a Writer at scrape time.
type Collector interface {
	Collect(*Writer)
}

// Counter counts up from zero.
type Counter struct {
	desc *Desc
	n    atomic.Uint64
}

// NewCounter returns a counter without labels.
func NewCounter(name, help string) *Counter {
	return &Counter{desc: &Desc{Name: name, Help: help, Type: "counter"}}
}

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Value is the count so far.
func (c *Counter) Value() uint64 { return c.n.Load() }

// Collect implements Collector.
func (c *Counter) Collect(w *Writer) { w.Sample(c.desc, float64(c.n.Load())) }

// Gauge is a value that goes up and down.
type Gauge struct {
	desc *Desc
	bits atomic.Uint64
}

// NewGauge returns a gauge without labels.
func NewGauge(name, help string) *Gauge {
	return &Gauge{desc: &Desc{Name: name, Help: help, Type: "gauge"}}
}

// Set sets the gauge.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Value is the gauge's value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

// Collect implements Collector.
func (g *Gauge) Collect(w *Writer) { w.Sample(g.desc, g.Value()) }

// GaugeFunc is a gauge whose value is read at scrape time.
type GaugeFunc struct {
	desc *Desc
	fn   func() float64
}

// NewGaugeFunc returns a gauge that calls fn on every scrape.
func NewGaugeFunc(name, help string, fn func() float64) *GaugeFunc {
	return &GaugeFunc{desc: &Desc{Name: name, Help: help, Type: "gauge"}, fn: fn}
}

// Collect implements Collector.
func (g *GaugeFunc) Collect(w *Writer) { w.Sample(g.desc, g.fn()) }

// vec holds one child per combination of label values; children are written
// with the vec's Desc (their own is nil).
type vec[T any] struct {
	desc     *Desc
	mu       sync.Mutex
	children map[string]*child[T]
}

type child[T any] struct {
	metric T
	values []string
}

func newVec[T any](typ, name, help string, labels []string) vec[T] {
	return vec[T]{desc: &Desc{Name: name, Help: help, Type: typ, Labels: labels}, children: map[string]*child[T]{}}
}

func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.desc.Labels) {
		panic("metrics: " + v.desc.Name + ": want label values for " + strings.Join(v.desc.Labels, ","))
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.children[key]
	if !ok {
		c = &child[T]{values: slices.Clone(values)}
		v.children[key] = c
	}
	return &c.metric
}

func (v *vec[T]) each(f func(c *T, values []string)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range v.children {
		f(&c.metric, c.values)
	}
}

// CounterVec is a counter per combination of label values.
type CounterVec struct{ vec[Counter] }

// NewCounterVec returns a counter family with the given label names.
func NewCounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{newVec[Counter]("counter", name, help, labels)}
}

// With returns the counter for these label values (in the order of the names).
func (v *CounterVec) With(values ...string) *Counter { return v.with(values) }

// Collect implements Collector.
func (v *CounterVec) Collect(w *Writer) {
	w.Declare(v.desc)
	v.each(func(c *Counter, values []string) { w.Sample(v.desc, float64(c.Value()), values...) })
}

// GaugeVec is a gauge per combination of label values.
type GaugeVec struct{ vec[Gauge] }

// NewGaugeVec returns a gauge family with the given label names.
func NewGaugeVec(name, help string, labels ...string) *GaugeVec {
	return &GaugeVec{newVec[Gauge]("gauge", name, help, labels)}
}

// With returns the gauge for these label values (in the order of the names).
func (v *GaugeVec) With(values ...string) *Gauge { return v.with(values) }

// Collect implements Collector.
func (v *GaugeVec) Collect(w *Writer) {
	w.Declare(v.desc)
	v.each(func(g *Gauge, values []string) { w.Sample(v.desc, g.Value(), values...) })
}

// Registry is the set of collectors one process exposes.
type Registry struct{ collectors []Collector }

// NewRegistry returns a registry of the Go runtime's and the process's metrics
// and cs.
func NewRegistry(cs ...Collector) *Registry {
	return &Registry{collectors: append([]Collector{Go(), Process(), buildInfo()}, cs...)}
}

// Text renders every collector's samples in the text exposition format, families
// sorted by name and samples by label values, so that two scrapes of unchanged
// metrics are byte-identical.
func (r *Registry) Text() []byte {
	w := &Writer{families: map[string]*family{}}
	for _, c := range r.collectors {
		c.Collect(w)
	}
	return w.text()
}

// Writer collects the samples of one scrape.
type Writer struct {
	families map[string]*family
}

type family struct {
	desc    *Desc
	samples []sample
}

type sample struct {
	suffix string // _bucket, _sum, _count of a histogram
	labels string // rendered {a="b",...} or ""
	value  float64
	order  int // a histogram's samples stay in bucket order
}

// Declare writes d's HELP and TYPE even when no sample of it follows: a
// family whose label values have not been seen yet (no write refused, no RA
// ignored) is still listed, so dashboards and alerts can be checked against
// a scrape.
func (w *Writer) Declare(d *Desc) {
	if _, ok := w.families[d.Name]; !ok {
		w.families[d.Name] = &family{desc: d}
	}
}

// Sample adds one sample of d with values for d's labels, in order.
func (w *Writer) Sample(d *Desc, value float64, labelValues ...string) {
	f, ok := w.families[d.Name]
	if !ok {
		f = &family{desc: d}
		w.families[d.Name] = f
	}
	f.samples = append(f.samples, sample{labels: renderLabels(d.Labels, labelValues), value: value})
}

func (w *Writer) text() []byte {
	names := make([]string, 0, len(w.families))
	for n := range w.families {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		f := w.families[n]
		slices.SortStableFunc(f.samples, func(a, b sample) int {
			if a.order != b.order {
				return a.order - b.order
			}
			return strings.Compare(a.labels, b.labels)
		})
		b.WriteString("# HELP " + n + " " + helpEscaper.Replace(f.desc.Help) + "\n")
		b.WriteString("# TYPE " + n + " " + f.desc.Type + "\n")
		for _, s := range f.samples {
			b.WriteString(n + s.suffix + s.labels + " " + formatValue(s.value) + "\n")
		}
	}
	return []byte(b.String())
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func renderLabels(names, values []string) string {
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		v := ""
		if i < len(values) {
			v = values[i]
		}
		b.WriteString(n + `="` + valueEscaper.Replace(v) + `"`)
	}
	b.WriteByte('}')
	return b.String()
}

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Sum is the total of every counter of the family.
func (v *CounterVec) Sum() uint64 {
	var n uint64
	v.each(func(c *Counter, _ []string) { n += c.Value() })
	return n
}

// Histogram counts observations in cumulative buckets (upper bounds), with
// their sum and count: Prometheus's histogram type.
type Histogram struct {
	desc    *Desc
	bounds  []float64
	buckets []atomic.Uint64 // one per bound, then +Inf
	sum     atomic.Uint64   // float64 bits
	count   atomic.Uint64
}

// NewHistogram returns a histogram with these bucket upper bounds (sorted).
func NewHistogram(name, help string, bounds ...float64) *Histogram {
	if !slices.IsSorted(bounds) {
		panic("metrics: " + name + ": bucket bounds not sorted")
	}
	return &Histogram{desc: &Desc{Name: name, Help: help, Type: "histogram"}, bounds: bounds,
		buckets: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe adds one observation.
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v) // the first bound >= v
	h.buckets[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
	h.count.Add(1)
}

// Count is the number of observations so far.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// Sum is the sum of the observations so far.
func (h *Histogram) Sum() float64 { return math.Float64frombits(h.sum.Load()) }

// Collect implements Collector.
func (h *Histogram) Collect(w *Writer) {
	w.Declare(h.desc)
	f := w.families[h.desc.Name]
	var cum uint64
	for i := range h.buckets {
		cum += h.buckets[i].Load()
		le := "+Inf"
		if i < len(h.bounds) {
			le = formatValue(h.bounds[i])
		}
		f.samples = append(f.samples, sample{suffix: "_bucket", labels: `{le="` + le + `"}`, value: float64(cum), order: i})
	}
	f.samples = append(f.samples,
		sample{suffix: "_sum", value: math.Float64frombits(h.sum.Load()), order: len(h.buckets)},
		sample{suffix: "_count", value: float64(h.count.Load()), order: len(h.buckets) + 1})
}
