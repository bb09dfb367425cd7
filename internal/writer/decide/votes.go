// The node rule (Ballot): which Nodes' digests vote, decoded once per
// value, with a garbled digest or a vote that lapses reported once.
//
// A Node's digest votes while the Node exists and is Ready, or has not been
// Ready for less than the grace. A Node with no Ready condition (no kubelet has
// reported yet) votes. A Node gone NotReady past the grace stops voting: the
// prefixes only it reported drain, and the current prefix stays unless the
// nodes still voting choose another. A deleted Node stops voting at once. An
// agent that died on a Ready node leaves its last digest voting; its deprecated
// prefixes still expire by their deadlines (status.history[].expiresAt).

package decide

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/renumber/renumber/internal/writer/api"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/metrics"
)

// NotReadySince is where the node cache keeps when a Node's Ready condition last
// turned False or Unknown. It exists only in the writer's cache, never in the API.
const NotReadySince = "renumber.internal/not-ready-since"

// GVR is the Node resource.
var GVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

var metricBadDigests = metrics.NewCounter("renumber_writer_invalid_digests_total", "Distinct garbled node digests ignored.")

// Recorder emits Kubernetes events.
type Recorder interface {
	Event(regarding *unstructured.Unstructured, warning bool, reason, note string)
}

// Ballot applies the node rule to the Node cache.
type Ballot struct {
	grace    time.Duration
	nodes    func() []any // the Node cache now (View objects)
	log      *slog.Logger
	recorder Recorder

	mu      sync.Mutex
	decoded map[string]decoded // node -> its digest, decoded once per value
	bad     map[string]string  // node -> garbled digest value already reported
	lapsed  map[string]bool    // nodes whose vote lapsed (not Ready past the grace)
}

// New returns a ballot over nodes; grace 0 turns the rule off (every digest
// votes).
func New(grace time.Duration, nodes func() []any, log *slog.Logger, rec Recorder) *Ballot {
	return &Ballot{grace: grace, nodes: nodes, log: log, recorder: rec,
		decoded: map[string]decoded{}, bad: map[string]string{}, lapsed: map[string]bool{}}
}

// View strips a Node (full or metadata only) to what the writer reads: its
// name, the digest and, when not Ready, since when. It is the Node cache's
// transform: kubelet's status updates then compare equal unless they change
// readiness.
func View(o any) (any, error) {
	if m, ok := o.(*metav1.PartialObjectMetadata); ok {
		out := api.Bare(m)
		if v, ok := m.Annotations[digest.Annotation]; ok {
			out.Annotations = map[string]string{digest.Annotation: capped(v)}
		}
		return out, nil
	}
	n, ok := o.(*corev1.Node)
	if !ok {
		return o, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}
	out.Name, out.ResourceVersion, out.UID = n.Name, n.ResourceVersion, n.UID
	ann := map[string]string{}
	if v, ok := n.Annotations[digest.Annotation]; ok {
		ann[digest.Annotation] = capped(v)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			ann[NotReadySince] = c.LastTransitionTime.UTC().Format(time.RFC3339)
		}
	}
	if len(ann) > 0 {
		out.Annotations = ann
	}
	return out, nil
}

// Slim is a copy of n with only what View reads: name, version, UID, the
// digest annotation and the Ready condition. A real Node is kilobytes (images,
// addresses, capacity); its slim copy is a few hundred bytes.
func Slim(n *corev1.Node) corev1.Node {
	out := corev1.Node{TypeMeta: n.TypeMeta}
	out.Name, out.ResourceVersion, out.UID = n.Name, n.ResourceVersion, n.UID
	if v, ok := n.Annotations[digest.Annotation]; ok {
		out.Annotations = map[string]string{digest.Annotation: capped(v)}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return out
}

// capped bounds what the cache keeps of a digest annotation: anyone who may
// patch a Node can write up to the API server's 256 KiB there, and a digest
// is at most digest.MaxBytes. One byte more keeps it too long to decode (it
// is reported garbled as before); the writer never writes it back.
func capped(v string) string {
	if len(v) > digest.MaxBytes {
		return v[:digest.MaxBytes+1]
	}
	return v
}

// State is what of a View the rule reads: a change of it is a reason for a pass.
func State(o any) string {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return ""
	}
	v, ok := m.Annotations[digest.Annotation]
	if ok {
		v = "=" + v
	}
	return v + "|" + m.Annotations[NotReadySince]
}

type decoded struct {
	value string
	node  digest.Node
	err   error
}

// decode decodes a node's digest, once per value.
func (b *Ballot) decode(node, value string) (digest.Node, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d, ok := b.decoded[node]; ok && d.value == value {
		return d.node, d.err
	}
	n, err := digest.Decode(value)
	b.decoded[node] = decoded{value: value, node: n, err: err}
	return n, err
}

// Reports returns the digests that vote at now, reporting garbled ones and
// lapsed nodes once, and when the next vote lapses (zero if none will).
func (b *Ballot) Reports(now time.Time) ([]Report, time.Time) {
	var out []Report
	var wake time.Time
	nodes := b.nodes()
	reporting := 0
	for _, o := range nodes {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			continue
		}
		v, ok := m.Annotations[digest.Annotation]
		if !ok {
			continue
		}
		reporting++
		lapse, notReady := b.lapse(m, now)
		if b.noteLapse(m.Name, notReady && !now.Before(lapse)) {
			continue
		}
		if notReady && (wake.IsZero() || lapse.Before(wake)) {
			wake = lapse
		}
		n, err := b.decode(m.Name, v)
		if err != nil {
			b.mu.Lock()
			seen := b.bad[m.Name] == v
			b.bad[m.Name] = v
			b.mu.Unlock()
			if !seen {
				metricBadDigests.Inc()
				b.log.Warn("ignoring garbled digest", "node", m.Name, "err", err)
				b.recorder.Event(nodeRef(m), true, "InvalidDigest", fmt.Sprintf("ignoring annotation %s: %v", digest.Annotation, err))
			}
			continue
		}
		b.mu.Lock()
		delete(b.bad, m.Name)
		b.mu.Unlock()
		out = append(out, Report{Node: m.Name, Digest: n, NotReady: notReady})
	}
	b.forgetGone(nodes, reporting)
	slices.SortFunc(out, func(a, b Report) int { return strings.Compare(a.Node, b.Node) })
	return out, wake
}

// lapse returns when a not-Ready node's vote lapses (false when it is Ready or
// the rule is off).
func (b *Ballot) lapse(m *metav1.PartialObjectMetadata, now time.Time) (time.Time, bool) {
	since, ok := m.Annotations[NotReadySince]
	if !ok || b.grace <= 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, since)
	if err != nil {
		t = now // no usable transition time: the grace starts when we saw it
	}
	return t.Add(b.grace), true
}

// noteLapse records whether node's vote has lapsed, logging the transitions,
// and returns lapsed.
func (b *Ballot) noteLapse(node string, lapsed bool) bool {
	b.mu.Lock()
	was := b.lapsed[node]
	if lapsed {
		b.lapsed[node] = true
	} else {
		delete(b.lapsed, node)
	}
	b.mu.Unlock()
	switch {
	case lapsed && !was:
		b.log.Info("node not Ready past the grace period; its digest no longer votes", "node", node, "grace", b.grace)
	case !lapsed && was:
		b.log.Info("node Ready again; its digest votes", "node", node)
	}
	return lapsed
}

// forgetGone drops what is remembered of Nodes deleted or without a digest.
// Every map holds only Nodes that reported a digest, so while none holds more
// entries than Nodes report now (the usual pass) there is nothing to look for.
func (b *Ballot) forgetGone(nodes []any, reporting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.decoded) <= reporting && len(b.lapsed) <= reporting && len(b.bad) <= reporting {
		return
	}
	present := make(map[string]bool, reporting)
	for _, o := range nodes {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok {
			if _, ok := m.Annotations[digest.Annotation]; ok {
				present[m.Name] = true
			}
		}
	}
	maps.DeleteFunc(b.lapsed, func(n string, _ bool) bool { return !present[n] })
	maps.DeleteFunc(b.bad, func(n, _ string) bool { return !present[n] })
	maps.DeleteFunc(b.decoded, func(n string, _ decoded) bool { return !present[n] })
}

func nodeRef(m *metav1.PartialObjectMetadata) *unstructured.Unstructured {
	node := &unstructured.Unstructured{}
	node.SetAPIVersion("v1")
	node.SetKind("Node")
	node.SetName(m.Name)
	node.SetUID(m.UID)
	return node
}

func (b *Ballot) isLapsed(node string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lapsed[node]
}

var descNodes = &metrics.Desc{Name: "renumber_writer_nodes", Type: "gauge", Labels: []string{"state"},
	Help: "Nodes by digest state: reporting (valid digest), missing (no digest annotation), invalid, not-ready (not Ready past the grace: not voting)."}

// Collectors returns this package's metrics: the counter, and the ballot's
// gauge computed from the cache at scrape time (no series outlives its Node).
func (b *Ballot) Collectors() []metrics.Collector { return []metrics.Collector{metricBadDigests, b} }

// Collect reports Nodes by digest state.
func (b *Ballot) Collect(w *metrics.Writer) {
	counts := map[string]float64{"reporting": 0, "missing": 0, "invalid": 0, "not-ready": 0}
	for _, o := range b.nodes() {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			continue
		}
		v, ok := m.Annotations[digest.Annotation]
		if !ok {
			counts["missing"]++
			continue
		}
		switch _, err := b.decode(m.Name, v); {
		case b.isLapsed(m.Name):
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
}
