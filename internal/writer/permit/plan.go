// A Plan holds the writes a shadow writer (writer --dry-run) would make.
// A shadow runs every pass a leader would, but each write is recorded here
// instead of sent: one Change per field it would change, from what is live to
// what it would write. Each pass replaces what the previous pass over the same
// work left, so the plan is what would be written now; empty when the shadow
// agrees with what is live.

package permit

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"github.com/renumber/renumber/internal/metrics"
)

// Change is one field of one object a write would change. From and To are the
// field's values in canonical form, "" when absent.
type Change struct {
	Object string `json:"object"` // "resource/name" or "resource/namespace/name"
	Field  string `json:"field"`
	From   string `json:"from"`
	To     string `json:"to"`
}

func (c Change) String() string {
	return fmt.Sprintf("%s %s: %q -> %q", c.Object, c.Field, c.From, c.To)
}

// Plan is safe for one writer of passes (Begin, Add, Commit) and any number of
// readers.
type Plan struct {
	log *slog.Logger

	mu      sync.Mutex
	byPass  map[string][]Change // by the work that produced them (a queue key)
	pass    string
	pending []Change
}

// NewPlan returns an empty plan; log gets one line per change that appears.
func NewPlan(log *slog.Logger) *Plan { return &Plan{log: log, byPass: map[string][]Change{}} }

// Begin starts a pass over the work named pass.
func (p *Plan) Begin(pass string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pass, p.pending = pass, nil
}

// Add records the changes of one write the pass would make.
func (p *Plan) Add(cs ...Change) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, cs...)
}

// Commit ends the pass: its changes replace those of the previous pass over the
// same work. Each change not planned before is logged once.
func (p *Plan) Commit() {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.byPass[p.pass]
	for _, c := range p.pending {
		if !slices.Contains(was, c) {
			p.log.Info("would write "+c.Object, "field", c.Field, "from", c.From, "to", c.To)
		}
	}
	if len(p.pending) == 0 {
		delete(p.byPass, p.pass)
	} else {
		p.byPass[p.pass] = p.pending
	}
	p.pass, p.pending = "", nil
}

// Changes returns every planned change, sorted by object and field.
func (p *Plan) Changes() []Change {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Change
	for _, cs := range p.byPass {
		out = append(out, cs...)
	}
	slices.SortFunc(out, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Object, b.Object), cmp.Compare(a.Field, b.Field), cmp.Compare(a.To, b.To))
	})
	return slices.Compact(out)
}

// Of returns the changes the last pass over the work named pass planned.
func (p *Plan) Of(pass string) []Change {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.byPass[pass])
}

// Document is what /debug/plan serves.
type Document struct {
	Changes []Change `json:"changes"`
}

// ServeHTTP serves the plan as JSON.
func (p *Plan) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	doc := Document{Changes: p.Changes()}
	if doc.Changes == nil {
		doc.Changes = []Change{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

// Collector reports the number of planned changes.
func (p *Plan) Collector() metrics.Collector {
	return metrics.NewGaugeFunc("renumber_writer_plan_changes",
		"Field changes the shadow writer (--dry-run) would write now; 0 when it agrees with what is live.",
		func() float64 { return float64(len(p.Changes())) })
}

// Fields returns one Change per key whose value differs between from and to
// (a key absent on one side is ""), sorted by key, each named prefix+key.
func Fields(object, prefix string, from, to map[string]string) []Change {
	var out []Change
	for k, v := range to {
		if from[k] != v {
			out = append(out, Change{Object: object, Field: prefix + k, From: from[k], To: v})
		}
	}
	for k, v := range from {
		if _, ok := to[k]; !ok && v != "" {
			out = append(out, Change{Object: object, Field: prefix + k, From: v})
		}
	}
	slices.SortFunc(out, func(a, b Change) int { return cmp.Compare(a.Field, b.Field) })
	return out
}
