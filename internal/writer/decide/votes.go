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
//
// A Node without a digest is awaited for StartupWait (Await) from when the
// ballot first sees it, unless it is not Ready: it votes for nothing, but
// counts toward the majority a first adoption needs (Report.Pending), so that
// on a fresh install the first agent to report does not decide alone, while a
// Node that runs no agent delays the first adoption by that wait at most.

package decide

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/metrics"
)

var metricBadDigests = metrics.NewCounter("renumber_writer_invalid_digests_total", "Distinct garbled node digests ignored.")

// Recorder emits Kubernetes events.
type Recorder interface {
	Event(regarding *unstructured.Unstructured, warning bool, reason, note string)
}

// Node is what the ballot reads of one Node (the Node cache keeps it so:
// caches.NodeView).
type Node struct {
	Name string
	UID  types.UID
	// Digest is the node's digest annotation; Reported says it has one.
	Digest   string
	Reported bool
	// Bytes is the annotation's real size when the cache kept only the
	// start of it (longer than any digest); 0 when it kept it whole.
	Bytes int
	// NotReadySince is when its Ready condition last turned False or
	// Unknown (RFC 3339); "" while it is Ready or has none.
	NotReadySince string
}

// Ballot applies the node rule to the Node cache.
type Ballot struct {
	grace    time.Duration
	nodes    func() []Node // the Node cache now
	log      *slog.Logger
	recorder Recorder

	mu      sync.Mutex
	decoded map[string]decoded   // node -> its digest, decoded once per value
	bad     map[string]string    // node -> garbled digest value already reported
	lapsed  map[string]bool      // nodes whose vote lapsed (not Ready past the grace)
	first   map[string]time.Time // node -> when the ballot first saw it
	wait    time.Duration        // how long a Node without a digest is awaited
}

// StartupWait is how long the ballot awaits a Node's first digest: the spread
// of agents starting on a fresh install, image pulls included.
const StartupWait = time.Minute

// Await sets how long the ballot awaits a Node's first digest (the writer's
// --node-startup-wait).
func (b *Ballot) Await(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wait = d
}

// New returns a ballot over nodes; grace 0 turns the rule off (every digest
// votes).
func New(grace time.Duration, nodes func() []Node, log *slog.Logger, rec Recorder) *Ballot {
	return &Ballot{grace: grace, nodes: nodes, log: log, recorder: rec,
		decoded: map[string]decoded{}, bad: map[string]string{}, lapsed: map[string]bool{},
		first: map[string]time.Time{}, wait: StartupWait}
}

type decoded struct {
	value string
	node  digest.Node
	err   error
}

// decode decodes a node's digest, once per value.
func (b *Ballot) decode(m Node) (digest.Node, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d, ok := b.decoded[m.Name]; ok && d.value == m.Digest {
		return d.node, d.err
	}
	n, err := digest.Decode(m.Digest)
	if m.Bytes > len(m.Digest) {
		// The cache kept only the start: say how long it really is.
		n, err = digest.Node{}, fmt.Errorf("%w: %d bytes, at most %d", digest.ErrInvalid, m.Bytes, digest.MaxBytes)
	}
	b.decoded[m.Name] = decoded{value: m.Digest, node: n, err: err}
	return n, err
}

// Vote is one Node with a digest, as the ballot judges it at a time.
type Vote struct {
	Report
	// Err: the digest cannot be read; it does not vote.
	Err error
	// Lapsed: not Ready past the grace; it does not vote.
	Lapsed bool
}

// Reports returns the digests that vote at now, reporting garbled ones and
// lapsed nodes once, then the Nodes still awaited (Pending), and when the next
// vote lapses or wait ends (zero if none will).
func (b *Ballot) Reports(now time.Time) ([]Report, time.Time) {
	nodes := b.nodes()
	votes, wake := b.votes(nodes, now)
	var out []Report
	for _, v := range votes {
		if v.Err == nil && !v.Lapsed {
			out = append(out, v.Report)
		}
	}
	pending, until := b.awaited(nodes, now)
	if !until.IsZero() && (wake.IsZero() || until.Before(wake)) {
		wake = until
	}
	return append(out, pending...), wake
}

// awaited returns the Nodes without a digest still within StartupWait of
// when the ballot first saw them, and not known to be not Ready, by name; and
// when the first of those waits ends.
func (b *Ballot) awaited(nodes []Node, now time.Time) ([]Report, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Report
	var wake time.Time
	for _, m := range nodes {
		first, ok := b.first[m.Name]
		if !ok {
			first = now
			b.first[m.Name] = now
		}
		if m.Reported || m.NotReadySince != "" || !now.Before(first.Add(b.wait)) {
			continue
		}
		out = append(out, Report{Node: m.Name, Pending: true})
		if end := first.Add(b.wait); wake.IsZero() || end.Before(wake) {
			wake = end
		}
	}
	if len(b.first) > len(nodes) {
		present := make(map[string]bool, len(nodes))
		for _, m := range nodes {
			present[m.Name] = true
		}
		maps.DeleteFunc(b.first, func(n string, _ time.Time) bool { return !present[n] })
	}
	slices.SortFunc(out, func(a, b Report) int { return strings.Compare(a.Node, b.Node) })
	return out, wake
}

// Votes returns every Node with a digest, by name, each with its decoded
// digest or why it does not vote (reporting garbled digests and lapsed nodes
// once), and when the next vote lapses (zero if none will).
func (b *Ballot) Votes(now time.Time) ([]Vote, time.Time) { return b.votes(b.nodes(), now) }

func (b *Ballot) votes(nodes []Node, now time.Time) ([]Vote, time.Time) {
	var out []Vote
	var wake time.Time
	reporting := 0
	for _, m := range nodes {
		if !m.Reported {
			continue
		}
		reporting++
		lapse, notReady := b.lapse(m, now)
		vote := Vote{Report: Report{Node: m.Name, NotReady: notReady}}
		if b.noteLapse(m.Name, notReady && !now.Before(lapse)) {
			// Decoded to be shown (kubectl renumber status), never reported.
			vote.Lapsed = true
			vote.Digest, vote.Err = b.decode(m)
			out = append(out, vote)
			continue
		}
		if notReady && (wake.IsZero() || lapse.Before(wake)) {
			wake = lapse
		}
		vote.Digest, vote.Err = b.decode(m)
		if vote.Err != nil {
			b.mu.Lock()
			seen := b.bad[m.Name] == m.Digest
			b.bad[m.Name] = m.Digest
			b.mu.Unlock()
			if !seen {
				metricBadDigests.Inc()
				b.log.Warn("ignoring garbled digest", "node", m.Name, "err", vote.Err)
				b.recorder.Event(nodeRef(m), true, "InvalidDigest", fmt.Sprintf("ignoring annotation %s: %v", digest.Annotation, vote.Err))
			}
			out = append(out, vote)
			continue
		}
		b.mu.Lock()
		delete(b.bad, m.Name)
		b.mu.Unlock()
		out = append(out, vote)
	}
	b.forgetGone(nodes, reporting)
	slices.SortFunc(out, func(a, b Vote) int { return strings.Compare(a.Node, b.Node) })
	return out, wake
}

// lapse returns when a not-Ready node's vote lapses (false when it is Ready or
// the rule is off).
func (b *Ballot) lapse(m Node, now time.Time) (time.Time, bool) {
	since := m.NotReadySince
	if since == "" || b.grace <= 0 {
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
func (b *Ballot) forgetGone(nodes []Node, reporting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.decoded) <= reporting && len(b.lapsed) <= reporting && len(b.bad) <= reporting {
		return
	}
	present := make(map[string]bool, reporting)
	for _, m := range nodes {
		if m.Reported {
			present[m.Name] = true
		}
	}
	maps.DeleteFunc(b.lapsed, func(n string, _ bool) bool { return !present[n] })
	maps.DeleteFunc(b.bad, func(n, _ string) bool { return !present[n] })
	maps.DeleteFunc(b.decoded, func(n string, _ decoded) bool { return !present[n] })
}

func nodeRef(m Node) *unstructured.Unstructured {
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
	for _, m := range b.nodes() {
		if !m.Reported {
			counts["missing"]++
			continue
		}
		switch _, err := b.decode(m); {
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
