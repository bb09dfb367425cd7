// Package backoff is the one retry delay of both binaries: exponential, doubling
// from a minimum to a maximum that each caller states, with ±20% jitter so that
// many agents (or a leader and its standby) that failed together do not retry
// together. Not safe for concurrent use: one Backoff per retry loop.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jitter is the fraction by which a delay is spread either way.
const Jitter = 0.2

// Backoff hands out growing delays.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
	// rand returns a float in [0, 1); tests replace it.
	rand func() float64
}

// NewWith is New with rand (a float in [0, 1)) as the source of jitter: a
// model test's deterministic one (nil: the default).
func NewWith(lo, hi time.Duration, rand func() float64) *Backoff {
	b := New(lo, hi)
	if rand != nil {
		b.rand = rand
	}
	return b
}

// New returns a Backoff from lo to hi (hi below lo is raised to lo).
func New(lo, hi time.Duration) *Backoff {
	return &Backoff{Min: lo, Max: max(lo, hi), rand: rand.Float64}
}

// Next returns the delay before the next attempt: the current step with jitter,
// then doubles the step up to Max.
func (b *Backoff) Next() time.Duration {
	if b.next < b.Min {
		b.next = b.Min
	}
	d := b.next
	b.next = min(2*b.next, b.Max)
	spread := (b.rand()*2 - 1) * Jitter // in [-Jitter, Jitter)
	return time.Duration(float64(d) * (1 + spread))
}

// Reset starts again from Min (after a success).
func (b *Backoff) Reset() { b.next = 0 }

// Timer is what Sleep needs of a clock (k8s.io/utils/clock has it).
type Timer interface {
	After(time.Duration) <-chan time.Time
}

// Sleep waits d on clk, or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, clk Timer, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-clk.After(d):
		return true
	}
}
