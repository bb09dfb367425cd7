// Package apply writes one object at a time. For each object that follows a
// DynamicPrefix - a pool of any kind, an HA Service, a CiliumBGPAdvertisement,
// the DynamicPrefix's own status - it renders what the object should hold for a
// decision, compares that in canonical form with what is live (or with what it
// wrote last, until the cache shows it), and patches only a difference, only
// the fields we own, conditional on the version it read, through the
// write-storm breaker. Each step returns an Outcome saying whether retrying
// can help.
package apply

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/writer/budget"
	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/guard"
	"github.com/renumber/renumber/internal/writer/informer"
	"github.com/renumber/renumber/internal/writer/plan"
	"github.com/renumber/renumber/internal/writer/service"
)

// FieldManager names every write of the writer.
const FieldManager = "renumber-writer"

// Writer makes the writes.
type Writer struct {
	Client dynamic.Interface  // pools, status, advertisements; writes pass the leader gate
	Meta   metadata.Interface // Services
	Clock  clock.Clock
	Log    *slog.Logger
	Events *guard.Events
	// Breaker is the write-storm breaker every write passes.
	Breaker *guard.Breaker
	// Requeue asks for another pass over a DynamicPrefix after a delay (a
	// throttled object, an episode to end).
	Requeue func(dp string, after time.Duration)
	// TargetKeys are the annotations HA Services get the DNS target under, in
	// order (service.DefaultTargetKeys; none: no target is written).
	TargetKeys []string
	// L2Nudge reports whether HA Services need the L2 announcer nudge
	// (service.Options); nil: never.
	L2Nudge func() bool
	// Plan, when set, makes the Writer a shadow (writer --dry-run): every
	// write it would make is recorded there and none is sent.
	Plan *plan.Plan

	// What was written last, per object, until the caches show it.
	statuses memo[dynamicprefix.Status]
	pools    memo[poolWrite]
	services memo[service.Annotations]
	adverts  memo[string]
	calico   memo[string]
	deleted  memo[struct{}] // advertisements deleted, until the cache shows it
}

// memo is guard.Memo keyed by object.
type memo[T any] struct{ guard.Memo[T] }

func (m *memo[T]) get(o object, base string) (T, bool) { return m.Get(o.String(), base) }
func (m *memo[T]) put(o object, base string, v T)      { m.Put(o.String(), base, v) }

// Forget drops every memo: a new leader term trusts only what the caches show.
func (w *Writer) Forget() {
	w.statuses.Reset()
	w.pools.Reset()
	w.services.Reset()
	w.adverts.Reset()
	w.calico.Reset()
	w.deleted.Reset()
}

// object names one object we write: the key of memos and of the write budget.
type object struct{ resource, namespace, name string }

// String is "resource/name" or "resource/namespace/name".
func (o object) String() string { return o.resource + "/" + informer.Key(o.namespace, o.name) }

// permit takes a write permit for o on behalf of the DynamicPrefix dp. A
// refusal starts (or continues) a throttling episode: one log line per
// episode, one event, the metric, and dp requeued for when a permit is back.
func (w *Writer) permit(o object, regarding *unstructured.Unstructured, dp string) error {
	p := w.Breaker.Take(o.String(), w.Clock.Now())
	if p.Again > 0 {
		w.Requeue(dp, p.Again)
	}
	if p.OK {
		return nil
	}
	metricRefused.With(o.resource).Inc()
	if p.Started {
		w.Log.Warn("write budget exceeded; writes to this object paused", "object", o.String(), "next", p.Again.Round(time.Second))
	}
	w.Events.Announce("budget/"+o.String(), regarding, true, "WriteBudgetExceeded",
		"more writes to this object than the budget allows (is another controller changing the same field?); writes paused")
	return fmt.Errorf("%s: %w (next permit in %s)", o, budget.ErrExceeded, p.Again.Round(time.Second))
}

// calm is called when a pass finds nothing to write to o: it ends o's
// throttling episode once its bucket is full again.
func (w *Writer) calm(o object, dp string) {
	ended, again := w.Breaker.Calm(o.String(), w.Clock.Now())
	if again > 0 {
		w.Requeue(dp, again)
	}
	if ended {
		w.Events.Forget("budget/" + o.String())
		w.Log.Info("writes flow again", "object", o.String())
	}
}

// Outcome of a step. Err is what went wrong (the step reported it already:
// condition, event or log); Retry says whether trying again with backoff can
// help. An API error can; a spec the user must fix cannot, and a write the
// breaker refused is already requeued for when a permit is back.
type Outcome struct {
	Err   error
	Retry bool
}

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

// Retry joins the errors worth retrying into one outcome.
func (os Outcomes) Retry() Outcome {
	var errs []error
	for _, o := range os {
		if o.Retry {
			errs = append(errs, o.Err)
		}
	}
	return Transient(errors.Join(errs...))
}
