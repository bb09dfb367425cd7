// Package budget is the writer's write-storm breaker: a token bucket per object
// and one for all writes. A bug, or another controller fighting over the same
// field, can then cost at most burst + rate x time writes, never a storm; writes
// resume by themselves as tokens come back.
package budget

import (
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrExceeded marks a write the budget refused.
var ErrExceeded = errors.New("write budget exceeded")

// Limits of the breaker.
type Limits struct {
	ObjectBurst     int     // writes one object may take at once
	ObjectPerMinute float64 // sustained writes per object
	TotalBurst      int
	TotalPerMinute  float64
}

// Flags registers the breaker's flags on fs, filling l.
func (l *Limits) Flags(fs *flag.FlagSet) {
	fs.IntVar(&l.ObjectBurst, "budget-object-burst", 5, "write-storm breaker: writes one object may take at once")
	fs.Float64Var(&l.ObjectPerMinute, "budget-object-per-minute", 2, "write-storm breaker: sustained writes per object per minute")
	fs.IntVar(&l.TotalBurst, "budget-total-burst", 200, "write-storm breaker: writes of all objects at once (a prefix change writes each managed object once)")
	fs.Float64Var(&l.TotalPerMinute, "budget-total-per-minute", 60, "write-storm breaker: sustained writes of all objects per minute")
}

// Validate rejects limits that would block every write.
func (l Limits) Validate() error {
	if l.ObjectBurst < 1 || l.TotalBurst < 1 || l.ObjectPerMinute <= 0 || l.TotalPerMinute <= 0 {
		return fmt.Errorf("budget: bursts must be >= 1 and rates > 0 (got %+v)", l)
	}
	return nil
}

// Budget hands out write permits.
type Budget struct {
	limits  Limits
	mu      sync.Mutex
	total   *rate.Limiter
	objects map[string]*rate.Limiter
}

// New returns a budget with full buckets.
func New(l Limits) *Budget {
	return &Budget{
		limits:  l,
		total:   rate.NewLimiter(rate.Limit(l.TotalPerMinute/60), l.TotalBurst),
		objects: map[string]*rate.Limiter{},
	}
}

// Take spends one permit for a write to key at now. When refused it returns how
// long until a permit will be there.
func (b *Budget) Take(key string, now time.Time) (ok bool, retryIn time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
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

// Forget drops an object's bucket (the object was deleted).
func (b *Budget) Forget(key string) {
	b.mu.Lock()
	delete(b.objects, key)
	b.mu.Unlock()
}
