// Memo, Breaker and Events (events.go) keep the writer from writing more than it must.
// Memo stands in for a write the caches do not show yet, so the next pass does not
// write it again; Breaker tracks the write-storm breaker's episodes per object; Events
// emits an event only when its text for a subject changes, so a steady problem
// costs one event, not one per pass.

package permit

import (
	"maps"
	"strconv"
	"sync"
	"time"
)

// Memo remembers what was written last to each object and from which
// resourceVersion, until the caches show a newer version. The zero value is
// ready.
type Memo[T any] struct {
	mu sync.Mutex
	m  map[Object]memoEntry[T]
}

type memoEntry[T any] struct {
	base    string // resourceVersion the write was computed from
	made    string // resourceVersion the write returned ("" unknown)
	written T
}

// Get returns what was written to key from base, while the cache still shows
// base; once the cache moved on, the entry is dropped.
func (m *Memo[T]) Get(key Object, base string) (T, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[key]
	if !ok || e.base != base {
		delete(m.m, key)
		var zero T
		return zero, false
	}
	return e.written, true
}

// Put records a write to key computed from base.
func (m *Memo[T]) Put(key Object, base string, written T) { m.PutMade(key, base, "", written) }

// PutMade records a write to key computed from base that made the version
// made.
func (m *Memo[T]) PutMade(key Object, base, made string, written T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[Object]memoEntry[T]{}
	}
	m.m[key] = memoEntry[T]{base: base, made: made, written: written}
}

// Sweep drops the entry of every object keep turns down (it was deleted:
// no cache will show it again, so Get would never drop it).
func (m *Memo[T]) Sweep(keep func(Object) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	maps.DeleteFunc(m.m, func(o Object, _ memoEntry[T]) bool { return !keep(o) })
}

// Behind reports whether a cache showing key at version cached has not seen
// the last write recorded for it: it still shows the version the write was
// computed from, or (both read as numbers, which the API server's are) one
// older than the write made. A write computed from such a cache would be
// made against a version that is gone (a conflict), or undo our own.
func (m *Memo[T]) Behind(key Object, cached string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[key]
	if !ok {
		return false
	}
	if cached == e.base {
		return true
	}
	c, err1 := strconv.ParseUint(cached, 10, 64)
	w, err2 := strconv.ParseUint(e.made, 10, 64)
	return err1 == nil && err2 == nil && c < w
}

// Breaker is the write budget with episodes: a key whose write the budget
// refused is throttled until its bucket is full again.
type Breaker struct {
	budget *Budget
	mu     sync.Mutex
	on     map[string]bool
}

// NewBreaker returns a breaker with full buckets.
func NewBreaker(l Limits) *Breaker {
	return &Breaker{budget: NewBudget(l), on: map[string]bool{}}
}

// Grant is the breaker's answer to a write.
type Grant struct {
	OK bool // write now
	// Started: this refusal starts an episode (log it once).
	Started bool
	// Again: look at the object again after this long (refused, or permitted
	// while an episode lasts); 0 when not needed.
	Again time.Duration
}

// Decide records the decision scope (a DynamicPrefix) writes for now
// (Budget.Decide).
func (b *Breaker) Decide(scope, decision string, now time.Time) (admitted, refused bool) {
	return b.budget.Decide(scope, decision, now)
}

// Take asks for a permit to write key at now on behalf of scope (the first
// writes under scope's new decision are free: Budget.TakeFor).
func (b *Breaker) Take(key, scope string, now time.Time) Grant {
	ok, wait, _ := b.budget.TakeFor(key, scope, now)
	b.mu.Lock()
	was := b.on[key]
	if !ok {
		b.on[key] = true
	}
	b.mu.Unlock()
	if !ok {
		return Grant{Started: !was, Again: wait}
	}
	p := Grant{OK: true}
	if was {
		_, p.Again = b.budget.Calm(key, now)
	}
	return p
}

// Refund gives back key's last permit if it was a free one and the write
// was not made (Budget.Refund).
func (b *Breaker) Refund(key string) { b.budget.Refund(key) }

// TakeQuietly asks for a permit without episodes (writes no pass will repeat,
// such as a release); when refused, it says how long until one is there.
func (b *Breaker) TakeQuietly(key string, now time.Time) (bool, time.Duration) {
	return b.budget.Take(key, now)
}

// Calm is called when a pass finds nothing to write to key: it ends key's
// episode once its bucket is full again (ended), or says when to look again.
func (b *Breaker) Calm(key string, now time.Time) (ended bool, again time.Duration) {
	b.mu.Lock()
	was := b.on[key]
	b.mu.Unlock()
	if !was {
		return false, 0
	}
	calm, in := b.budget.Calm(key, now)
	if !calm {
		return false, in
	}
	b.mu.Lock()
	delete(b.on, key)
	b.mu.Unlock()
	return true, 0
}

// Throttled counts the keys in an episode now.
func (b *Breaker) Throttled() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.on)
}

// Sweep ends the episode and drops the budget's state of every key keep
// turns down (its object was deleted).
func (b *Breaker) Sweep(keep func(key string) bool) {
	b.mu.Lock()
	maps.DeleteFunc(b.on, func(key string, _ bool) bool { return !keep(key) })
	b.mu.Unlock()
	b.budget.Sweep(keep)
}
