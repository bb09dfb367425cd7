package permit

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/metrics"
)

// FieldManager names every write of the writer.
const FieldManager = "renumber-writer"

var (
	metricWrites  = metrics.NewCounterVec("renumber_writer_object_writes_total", "Objects written because their rendered content changed, by resource.", "resource")
	metricRefused = metrics.NewCounterVec("renumber_writer_writes_refused_total", "Object writes the write-storm breaker refused, by resource.", "resource")
	metricEvents  = metrics.NewCounterVec("renumber_writer_events_total", "Events the writer recorded, or dropped over the event budget, by outcome.", "outcome")
	metricDryRuns = metrics.NewCounterVec("renumber_writer_dry_runs_total", "Dry runs of object writes sent to ask the API server's admission, by resource.", "resource")
)

// Collectors returns this package's metrics.
func Collectors() []metrics.Collector {
	return []metrics.Collector{metricWrites, metricRefused, metricEvents, metricDryRuns}
}

// Counted counts one write to an object of resource.
func Counted(resource string) { metricWrites.With(resource).Inc() }

// Written is the number of objects written so far (every resource).
func Written() uint64 { return metricWrites.Sum() }

// DryRuns is the number of dry runs sent so far (every resource): they are
// requests like any write, counted apart so that a dry run is no write.
func DryRuns() uint64 { return metricDryRuns.Sum() }

// Object names one object we write: the key of memos and of the write budget.
type Object struct{ Resource, Namespace, Name string }

// String is "resource/name" or "resource/namespace/name".
func (o Object) String() string { return o.Resource + "/" + api.Key(o.Namespace, o.Name) }

// dryRun marks the budget key of a dry run of a write to an object (Gate.DryRun).
const dryRun = " (dry run)"

// objectOf is the object a budget key (Object.String, perhaps marked as a
// dry run) names; false for a key no Object makes.
func objectOf(key string) (Object, bool) {
	parts := strings.Split(strings.TrimSuffix(key, dryRun), "/")
	switch len(parts) {
	case 2:
		return Object{Resource: parts[0], Name: parts[1]}, true
	case 3:
		return Object{Resource: parts[0], Namespace: parts[1], Name: parts[2]}, true
	}
	return Object{}, false
}

// Gate is what every write passes: the permit for each write.
type Gate struct {
	Clock  clock.Clock
	Log    *slog.Logger
	Events *Events
	// Breaker is the write-storm breaker every write passes.
	Breaker *Breaker
	// Requeue asks for another pass over a DynamicPrefix after a delay (a
	// throttled object, an episode to end).
	Requeue func(dp string, after time.Duration)
	// Plan, when set, makes the writes a shadow's (writer --dry-run): every
	// write is recorded there and none is sent.
	Plan *Plan
}

// Permit takes a write permit for o on behalf of the DynamicPrefix dp. A
// refusal starts (or continues) a throttling episode: one log line per
// episode, one event, the metric, and dp requeued for when a permit is back.
func (g *Gate) Permit(o Object, regarding *unstructured.Unstructured, dp string) error {
	if ok, wait := g.TakePermit(o, regarding, dp); !ok {
		return fmt.Errorf("%s: %w (next permit in %s)", o, model.ErrBudgetExceeded, wait.Round(time.Second))
	}
	return nil
}

// TakePermit is Permit answering how long until a permit is back when it
// refuses: for a write whose retry the caller queues itself (a Service's
// release, whose key names no DynamicPrefix to requeue). A fight over a
// release is a fight like any other (red team r10b F2): the same bucket,
// the same episode, one event for it.
func (g *Gate) TakePermit(o Object, regarding *unstructured.Unstructured, dp string) (bool, time.Duration) {
	p := g.Breaker.Take(o.String(), dp, g.Clock.Now())
	if p.Again > 0 {
		g.Requeue(dp, p.Again)
	}
	if p.OK {
		return true, 0
	}
	metricRefused.With(o.Resource).Inc()
	if p.Started {
		g.Log.Warn("write budget exceeded; writes to this object paused", "object", o.String(), "next", p.Again.Round(time.Second))
	}
	g.Events.Announce("budget/"+o.String(), regarding, true, "WriteBudgetExceeded",
		"more writes to this object than the budget allows (is another controller changing the same field?); writes paused")
	return false, p.Again
}

// Unwritten is told that the write to o that Permit let through failed with
// err. When the API server refused it (any 4xx: a conflict, an admission
// refusal, an object gone - the object is unchanged), a free write it spent
// is given back (Budget.Refund): a renumbering whose write met a conflict
// (its load balancer wrote the Service's status meanwhile) retries free,
// not from the buckets a tenant's fight may spend (red team r10b F1b).
// Anything else (a timeout, a lost connection, a 5xx) may have been
// written, and spends it.
func (g *Gate) Unwritten(o Object, err error) {
	if refusedByTheServer(err) {
		g.Breaker.Refund(o.String())
	}
}

// refusedByTheServer reports whether err is the API server's refusal of a
// request, which then changed nothing.
func refusedByTheServer(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500
}

// PermitQuietly is Permit for a write no pass will repeat (a release): no
// episode, no event; a refusal is counted and says how long until a permit is
// back.
func (g *Gate) PermitQuietly(o Object) (bool, time.Duration) {
	ok, wait := g.Breaker.TakeQuietly(o.String(), g.Clock.Now())
	if !ok {
		metricRefused.With(o.Resource).Inc()
	}
	return ok, wait
}

// DryRun takes a permit for a dry run of a write to o on behalf of the
// DynamicPrefix dp, and counts it. A dry run is a request like any write, so
// it passes the breaker; it has a bucket of its own (o's, marked as a dry
// run), so asking never spends the permit of the write it asks about. A
// refusal is quiet and counted: the caller writes without asking.
func (g *Gate) DryRun(o Object, dp string) bool {
	p := g.Breaker.budget
	if ok, _, _ := p.TakeFor(o.String()+dryRun, dp, g.Clock.Now()); !ok {
		metricRefused.With(o.Resource).Inc()
		return false
	}
	metricDryRuns.With(o.Resource).Inc()
	return true
}

// Sweep forgets the write budget's state (buckets, free-write marks,
// episodes) of every object keep turns down: one deleted.
func (g *Gate) Sweep(keep func(Object) bool) {
	g.Breaker.Sweep(func(key string) bool {
		o, ok := objectOf(key)
		return !ok || keep(o)
	})
}

// Decide names the decision of this pass over the DynamicPrefix dp (its
// spec's generation and pooled prefixes): a new one is a real change, whose
// first FreeWrites writes to each object the breaker lets through
// (budget.go). A new
// decision beyond the decision budget is logged: its writes count against
// the budget like any other.
func (g *Gate) Decide(dp, decision string) {
	if _, refused := g.Breaker.Decide(dp, decision, g.Clock.Now()); refused {
		g.Log.Warn(dp + ": real changes come faster than the decision budget; their writes count against the write budget")
	}
}

// Calm is called when a pass finds nothing to write to o: it ends o's
// throttling episode once its bucket is full again.
func (g *Gate) Calm(o Object, dp string) {
	ended, again := g.Breaker.Calm(o.String(), g.Clock.Now())
	if again > 0 {
		g.Requeue(dp, again)
	}
	if ended {
		g.Events.Forget("budget/" + o.String())
		g.Log.Info("writes flow again", "object", o.String())
	}
}

// Shadow reports whether the gate only plans (writer --dry-run); then the
// changes of the write the caller was about to make are recorded in the plan
// instead, and the caller returns as if the write was made, without touching
// memo or budget.
func (g *Gate) Shadow(cs ...Change) bool {
	if g.Plan == nil {
		return false
	}
	g.Plan.Add(cs...)
	return true
}

// Created, Updated and Removed describe a whole object's write in a plan.
func Created(o Object, v any) Change {
	return Change{Object: o.String(), Field: "(object)", To: compact(v)}
}

// Updated: o's spec goes from from to to.
func Updated(o Object, from, to any) Change {
	return Change{Object: o.String(), Field: "spec", From: compact(from), To: compact(to)}
}

// Removed: o is deleted.
func Removed(o Object) Change {
	return Change{Object: o.String(), Field: "(object)", From: "exists"}
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Outcome of a step. Err is what went wrong (the step reported it already:
// condition, event or log); Retry says whether trying again with backoff can
// help. An API error can; a spec the user must fix cannot, and a write the
// breaker refused is already requeued for when a permit is back. After, with
// no error, is a step that waits for something outside the writer (its cache
// to show its own last write, the API server's admission to see a status):
// the work is looked at again after that long, on the queue's clock, with no
// backoff; a pass never waits in place.
type Outcome struct {
	Err   error
	Retry bool
	After time.Duration
}

// Later is the outcome of a step that waits: look again after d.
func Later(d time.Duration) Outcome { return Outcome{After: d} }

// Transient is an outcome worth retrying (none when err is nil).
func Transient(err error) Outcome { return Outcome{Err: err, Retry: err != nil} }

// Final is an outcome that retrying cannot change.
func Final(err error) Outcome { return Outcome{Err: err} }

// Outcomes of several steps.
type Outcomes []Outcome

// Err joins every error.
func (os Outcomes) Err() error {
	var errs []error
	for _, o := range os {
		errs = append(errs, o.Err)
	}
	return errors.Join(errs...)
}

// Retry joins the errors worth retrying into one outcome; without any, the
// shortest wait of a step that waits (Later).
func (os Outcomes) Retry() Outcome {
	var errs []error
	var wait time.Duration
	for _, o := range os {
		if o.Retry {
			errs = append(errs, o.Err)
		}
		if o.After > 0 && o.Err == nil && (wait == 0 || o.After < wait) {
			wait = o.After
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Transient(err)
	}
	return Later(wait)
}
