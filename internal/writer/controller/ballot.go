// The ballot's shell: the node rule (decide.Ballot) is pure and does no
// I/O; this holds it behind a lock (the workers, kubectl renumber status and
// the metrics scrape share it), feeds it the Node cache, and reports what it
// notes - one journal line, one event and one count per garbled digest
// value, one line per vote that lapses or comes back. The controller owns
// the side effects, so the shell lives here.

package controller

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/writer/decide"
)

var metricBadDigests = metrics.NewCounter("renumber_writer_invalid_digests_total", "Distinct garbled node digests ignored.")

// Ballot applies the node rule to the Node cache and reports what it notes.
type Ballot struct {
	nodes    func() []decide.Node // the Node cache now
	log      *slog.Logger
	recorder Recorder

	mu   sync.Mutex
	rule *decide.Ballot
}

// NewBallot returns the node rule (grace 0 turns it off, wait is how long a
// Node without a digest is awaited) over nodes, reporting to log and rec.
func NewBallot(grace, wait time.Duration, nodes func() []decide.Node, log *slog.Logger, rec Recorder) *Ballot {
	rule := decide.New(grace)
	rule.Await(wait)
	return &Ballot{nodes: nodes, log: log, recorder: rec, rule: rule}
}

// Reports returns the digests that vote at now and the Nodes still awaited,
// and when that changes by time alone (zero if it will not).
func (b *Ballot) Reports(now time.Time) ([]decide.Report, time.Time) {
	return judge(b, now, (*decide.Ballot).Reports)
}

// Votes returns every Node with a digest and why it does not vote
// (kubectl renumber status), and when the next vote lapses.
func (b *Ballot) Votes(now time.Time) ([]decide.Vote, time.Time) {
	return judge(b, now, (*decide.Ballot).Votes)
}

// judge runs the rule over the Node cache now, under the lock, and reports
// what it noted outside it.
func judge[T any](b *Ballot, now time.Time, rule func(*decide.Ballot, []decide.Node, time.Time) ([]T, time.Time, []decide.Note)) ([]T, time.Time) {
	nodes := b.nodes()
	b.mu.Lock()
	out, wake, notes := rule(b.rule, nodes, now)
	b.mu.Unlock()
	b.report(notes)
	return out, wake
}

// report logs what the rule noted, and emits and counts garbled digests.
func (b *Ballot) report(notes []decide.Note) {
	for _, n := range notes {
		switch n.Kind {
		case decide.Garbled:
			metricBadDigests.Inc()
			b.log.Warn("ignoring garbled digest", "node", n.Node.Name, "err", n.Err)
			b.recorder.Event(nodeRef(n.Node), true, "InvalidDigest", fmt.Sprintf("ignoring annotation %s: %v", digest.Annotation, n.Err))
		case decide.Lapsed:
			b.log.Info("node not Ready past the grace period; its digest no longer votes", "node", n.Node.Name, "grace", b.rule.Grace())
		case decide.Votes:
			b.log.Info("node Ready again; its digest votes", "node", n.Node.Name)
		}
	}
}

func nodeRef(m decide.Node) *unstructured.Unstructured {
	node := &unstructured.Unstructured{}
	node.SetAPIVersion("v1")
	node.SetKind("Node")
	node.SetName(m.Name)
	node.SetUID(types.UID(m.UID))
	return node
}

var descNodes = &metrics.Desc{Name: "renumber_writer_nodes", Type: "gauge", Labels: []string{"state"},
	Help: "Nodes by digest state: reporting (valid digest), missing (no digest annotation), invalid, not-ready (not Ready past the grace: not voting)."}

// Collectors returns the ballot's metrics: the counter, and the gauge
// computed from the cache at scrape time (no series outlives its Node).
func (b *Ballot) Collectors() []metrics.Collector { return []metrics.Collector{metricBadDigests, b} }

// Collect reports Nodes by digest state.
func (b *Ballot) Collect(w *metrics.Writer) {
	counts := map[string]float64{decide.NodeReporting: 0, decide.NodeMissing: 0, decide.NodeInvalid: 0, decide.NodeNotReady: 0}
	nodes := b.nodes()
	b.mu.Lock()
	for _, m := range nodes {
		counts[b.rule.State(m)]++
	}
	b.mu.Unlock()
	for state, n := range counts {
		w.Sample(descNodes, n, state)
	}
}
