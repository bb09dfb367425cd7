// Budget is the writer's write-storm breaker: a token bucket per object
// and one for all writes. A bug, or another controller fighting over the same
// field, can then cost at most burst + rate x time writes, never a storm; writes
// resume by themselves as tokens come back.
//
// A storm is told from a renumbering by the decision behind a write. Each pass
// over a DynamicPrefix names its decision (Decide: the spec's generation and
// the pooled prefixes, current first); a new decision is a real change. A
// renumbering reaching an honest object costs it a small constant number of
// writes under that decision (a Service: its new address, then its DNS target
// once the load balancer publishes it; a pool: one), so the first FreeWrites
// writes to each object under a new decision are that change reaching the
// object: they pass free of the object and total buckets. Any further write
// to the same object under the same decision (a fight, a bug) takes from the
// buckets as before. A free write is spent only when the write is made: one
// the API server refused (a conflict, an admission refusal: the object
// unchanged) is given back (Refund), at most FreeWrites times per object and
// decision, so that retries of a refused write are bounded too. The total
// bucket then bounds fights and bugs only: a tenant fighting over its own
// objects spends it, never another object's renumbering (red team r10b).
// New decisions are themselves budgeted per DynamicPrefix (DecisionBurst,
// then DecisionsPerMinute): a decision over that budget writes from the
// buckets only. So the worst case, per minute and DynamicPrefix, is
// (DecisionBurst in the first minute, then DecisionsPerMinute) x the objects
// that follow it x FreeWrites writes, plus the buckets: ObjectBurst +
// ObjectPerMinute per object, TotalBurst + TotalPerMinute in all (and as
// many refused requests again, the refunds).

package permit

import (
	"flag"
	"fmt"
	"maps"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits of the breaker.
type Limits struct {
	ObjectBurst     int     // writes one object may take at once
	ObjectPerMinute float64 // sustained writes per object
	TotalBurst      int
	TotalPerMinute  float64
	// New decisions per DynamicPrefix whose first FreeWrites writes to each
	// object are free (0: none is).
	DecisionBurst      int
	DecisionsPerMinute float64
	// Events the writer records at once and per minute, whatever their
	// cause (EventBudget): a hostile node or Service owner can cause them.
	EventBurst      int
	EventsPerMinute float64
}

// Flags registers the breaker's flags on fs, filling l.
func (l *Limits) Flags(fs *flag.FlagSet) {
	fs.IntVar(&l.ObjectBurst, "budget-object-burst", 5, "write-storm breaker: writes one object may take at once")
	fs.Float64Var(&l.ObjectPerMinute, "budget-object-per-minute", 2, "write-storm breaker: sustained writes per object per minute")
	fs.IntVar(&l.TotalBurst, "budget-total-burst", 200, "write-storm breaker: writes of all objects at once (a prefix change writes each managed object once)")
	fs.Float64Var(&l.TotalPerMinute, "budget-total-per-minute", 60, "write-storm breaker: sustained writes of all objects per minute")
	fs.IntVar(&l.DecisionBurst, "budget-decision-burst", 20, fmt.Sprintf("write-storm breaker: real changes (new decisions) per DynamicPrefix at once whose first %d writes to each object do not count against the budget (0: every write counts)", FreeWrites))
	fs.Float64Var(&l.DecisionsPerMinute, "budget-decisions-per-minute", 10, fmt.Sprintf("write-storm breaker: sustained real changes per DynamicPrefix per minute whose first %d writes to each object do not count", FreeWrites))
	fs.IntVar(&l.EventBurst, "budget-event-burst", 100, "write-storm breaker: events recorded at once (past the budget they are dropped and counted)")
	fs.Float64Var(&l.EventsPerMinute, "budget-events-per-minute", 30, "write-storm breaker: sustained events recorded per minute")
}

// Validate rejects limits that would block every write.
func (l Limits) Validate() error {
	if l.ObjectBurst < 1 || l.TotalBurst < 1 || l.ObjectPerMinute <= 0 || l.TotalPerMinute <= 0 {
		return fmt.Errorf("budget: bursts must be >= 1 and rates > 0 (got %+v)", l)
	}
	if l.DecisionBurst < 0 || l.DecisionsPerMinute < 0 || (l.DecisionBurst > 0 && l.DecisionsPerMinute == 0) {
		return fmt.Errorf("budget: the decision burst must be >= 0, and its rate > 0 when it is (got %+v)", l)
	}
	if l.EventBurst < 1 || l.EventsPerMinute <= 0 {
		return fmt.Errorf("budget: the event burst must be >= 1 and its rate > 0 (got %+v)", l)
	}
	return nil
}

// EventBudget bounds the events the writer records: every event is a write
// to the API, and what causes one (a garbled digest, a tenant's invalid
// annotation) can be repeated by whoever controls that input. Past the
// budget, events are dropped and counted until it refills.
type EventBudget struct {
	mu       sync.Mutex
	bucket   *rate.Limiter
	dropping bool
}

// NewEventBudget returns a full event budget.
func NewEventBudget(l Limits) *EventBudget {
	return &EventBudget{bucket: rate.NewLimiter(rate.Limit(l.EventsPerMinute/60), l.EventBurst)}
}

// Take reports whether an event may be recorded at now, and whether this
// refusal is the first since events were last recorded (say so once).
func (b *EventBudget) Take(now time.Time) (ok, started bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ok = b.bucket.AllowN(now, 1)
	started = !ok && !b.dropping
	b.dropping = !ok
	if ok {
		metricEvents.With("recorded").Inc()
	} else {
		metricEvents.With("dropped").Inc()
	}
	return ok, started
}

// FreeWrites is how many writes to one object a new admitted decision makes
// free: what a renumbering costs an honest object. A Service takes two (its
// address on the new prefix; its DNS target once its load balancer publishes
// that address), a pool one; the third is slack for a write the renumbering
// makes again when the object's own controller moved under it (LB-IPAM
// writing a Service's status between the writer's read and its write).
const FreeWrites = 3

// Budget hands out write permits.
type Budget struct {
	limits  Limits
	mu      sync.Mutex
	total   *rate.Limiter
	objects map[string]*rate.Limiter
	scopes  map[string]*decisions
	// wrote is, per object, its free writes under the decision they were
	// counted for.
	wrote map[string]*freeWrites
}

// freeWrites are one object's free writes under one decision.
type freeWrites struct {
	mark     string // scope and decision
	spent    int    // free writes taken and not given back
	refunded int    // free writes given back (Refund)
	pending  bool   // the object's last permit was a free one
}

// decisions are one DynamicPrefix's: its bucket, and the latest.
type decisions struct {
	bucket   *rate.Limiter
	decision string
	admitted bool
}

// NewBudget returns a budget with full buckets.
func NewBudget(l Limits) *Budget {
	return &Budget{
		limits:  l,
		total:   rate.NewLimiter(rate.Limit(l.TotalPerMinute/60), l.TotalBurst),
		objects: map[string]*rate.Limiter{},
		scopes:  map[string]*decisions{},
		wrote:   map[string]*freeWrites{},
	}
}

// Decide records the decision the passes over scope (a DynamicPrefix) now
// write for. A new decision takes a permit from scope's decision bucket:
// admitted, its first write to each object is free (TakeFor). refused
// reports a new decision the decision bucket turned down (never when the
// decision budget is 0: then no decision is admitted).
func (b *Budget) Decide(scope, decision string, now time.Time) (admitted, refused bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.scopes[scope]
	if s == nil {
		s = &decisions{bucket: rate.NewLimiter(rate.Limit(b.limits.DecisionsPerMinute/60), b.limits.DecisionBurst)}
		b.scopes[scope] = s
	}
	if s.decision == decision {
		return s.admitted, false
	}
	s.decision = decision
	s.admitted = b.limits.DecisionBurst > 0 && s.bucket.AllowN(now, 1)
	return s.admitted, !s.admitted && b.limits.DecisionBurst > 0
}

// TakeFor is Take for a write to key on behalf of scope: the first
// FreeWrites writes to key under scope's admitted decision are free (free
// reports it).
func (b *Budget) TakeFor(key, scope string, now time.Time) (ok bool, retryIn time.Duration, free bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.scopes[scope]; s != nil && s.admitted {
		mark := scope + "\x00" + s.decision
		w := b.wrote[key]
		if w == nil || w.mark != mark {
			w = &freeWrites{mark: mark}
			b.wrote[key] = w
		}
		if w.spent < FreeWrites {
			w.spent++
			w.pending = true
			return true, 0, true
		}
	}
	ok, retryIn = b.take(key, now)
	return ok, retryIn, false
}

// Refund is told that the write key was last permitted was not made (the
// API server refused it: the object is unchanged). A free permit is given
// back, at most FreeWrites times per object and decision; a permit from the
// buckets is not (a fight's refused writes are requests like its others).
func (b *Budget) Refund(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.wrote[key]
	if w == nil || !w.pending {
		return
	}
	w.pending = false
	if w.refunded < FreeWrites {
		w.spent--
		w.refunded++
	}
}

// Take spends one permit for a write to key at now. When refused it returns how
// long until a permit will be there.
func (b *Budget) Take(key string, now time.Time) (ok bool, retryIn time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.take(key, now)
}

// take is Take with b.mu held. The permit is from the buckets: a refund
// after it gives nothing back.
func (b *Budget) take(key string, now time.Time) (ok bool, retryIn time.Duration) {
	if w := b.wrote[key]; w != nil {
		w.pending = false
	}
	obj := b.objects[key]
	if obj == nil {
		obj = rate.NewLimiter(rate.Limit(b.limits.ObjectPerMinute/60), b.limits.ObjectBurst)
		b.objects[key] = obj
	}
	ro := obj.ReserveN(now, 1)
	if d := ro.DelayFrom(now); d > 0 {
		ro.CancelAt(now)
		return false, d
	}
	rt := b.total.ReserveN(now, 1)
	if d := rt.DelayFrom(now); d > 0 {
		rt.CancelAt(now)
		ro.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Calm reports whether key's bucket is full again at now (no recent pressure),
// and if not, how long until it will be.
func (b *Budget) Calm(key string, now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	obj := b.objects[key]
	if obj == nil {
		return true, 0
	}
	missing := float64(b.limits.ObjectBurst) - obj.TokensAt(now)
	if missing <= 1e-9 {
		return true, 0
	}
	return false, time.Duration(missing / (b.limits.ObjectPerMinute / 60) * float64(time.Second))
}

// Sweep drops the bucket and free-write mark of every object keep turns
// down (it was deleted): what the budget holds is bounded by the objects
// that exist, not by every object ever written (red team r9b).
func (b *Budget) Sweep(keep func(key string) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	maps.DeleteFunc(b.objects, func(key string, _ *rate.Limiter) bool { return !keep(key) })
	maps.DeleteFunc(b.wrote, func(key string, _ *freeWrites) bool { return !keep(key) })
}
