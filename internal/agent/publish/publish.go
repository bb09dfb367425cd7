// Package publish keeps one annotation on the agent's own Node equal to the latest
// digest: it writes only when the live value differs, debounces bursts so one
// network change is one write (but never holds a change back longer than
// MaxDelay, however long the burst), keeps its own write rate within a budget
// (a flood of RAs cannot become a write storm), restores a value someone
// removed or altered, and retries API errors with exponential backoff while
// observation goes on.
package publish

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/backoff"
)

// Patcher writes the annotation on the node (a merge patch of that key only).
type Patcher interface {
	Patch(ctx context.Context, value string) error
}

// Config of a publisher.
type Config struct {
	// Debounce is how long the wanted value must stay put before it is written.
	Debounce time.Duration
	// MaxDelay bounds how long a change waits for the value to stay put: under
	// continuous change the latest value is written MaxDelay after the first.
	MaxDelay time.Duration
	// Burst and PerMinute are the write budget: Burst writes at once, then
	// PerMinute a minute. Zero PerMinute: no budget.
	Burst     int
	PerMinute float64
}

// Publisher publishes the wanted value when it differs from the live one.
type Publisher struct {
	patcher Patcher
	clock   clock.Clock
	log     *slog.Logger
	cfg     Config
	budget  *rate.Limiter // nil: none
	retry   func() *backoff.Backoff

	mu        sync.Mutex
	want      string
	haveWant  bool
	live      string
	liveKnown bool
	kick      chan struct{}
	writes    int
	biting    bool      // the budget made the last write wait
	since     time.Time // when the wanted value first differed from the live one
}

// New returns a publisher.
func New(p Patcher, clk clock.Clock, log *slog.Logger, cfg Config) *Publisher {
	pub := &Publisher{
		patcher: p, clock: clk, log: log, cfg: cfg,
		retry: func() *backoff.Backoff { return backoff.New(500*time.Millisecond, 30*time.Second) },
		kick:  make(chan struct{}, 1),
	}
	if cfg.PerMinute > 0 {
		pub.budget = rate.NewLimiter(rate.Limit(cfg.PerMinute/60), max(cfg.Burst, 1))
	}
	return pub
}

// Want sets the value the node should carry.
func (p *Publisher) Want(v string) {
	p.mu.Lock()
	changed := !p.haveWant || p.want != v
	p.want, p.haveWant = v, true
	p.noteDifference()
	p.mu.Unlock()
	if changed {
		p.poke()
	}
}

// Live records the value the API server holds (from a Get or the node watch);
// exists is false when the annotation or the node is absent.
func (p *Publisher) Live(v string, exists bool) {
	p.mu.Lock()
	changed := !p.liveKnown || p.live != v
	if !exists {
		v = "\x00absent"
	}
	p.live, p.liveKnown = v, true
	p.noteDifference()
	p.mu.Unlock()
	if changed {
		p.poke()
	}
}

// noteDifference keeps since: the moment the wanted value began to differ
// from the live one, cleared when they agree again (p.mu held).
func (p *Publisher) noteDifference() {
	switch {
	case p.liveKnown && p.haveWant && p.want == p.live:
		p.since = time.Time{}
	case p.since.IsZero():
		p.since = p.clock.Now()
	}
}

// Writes is how many patches succeeded.
func (p *Publisher) Writes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writes
}

func (p *Publisher) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// pending returns the value to write, if any, and since when it has waited.
func (p *Publisher) pending() (string, time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.haveWant || !p.liveKnown || p.want == p.live {
		return "", time.Time{}, false
	}
	return p.want, p.since, true
}

// Run publishes until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	retry := p.retry()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		// Debounce: let the burst settle (each new kick restarts the quiet
		// period), but no longer than MaxDelay in all.
		deadline := p.clock.Now().Add(max(p.cfg.MaxDelay, p.cfg.Debounce))
	settle:
		for {
			wait := min(p.cfg.Debounce, deadline.Sub(p.clock.Now()))
			if wait <= 0 {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-p.kick:
			case <-p.clock.After(wait):
				break settle
			}
		}
		if !p.await(ctx) {
			return
		}
		for {
			v, since, ok := p.pending()
			if !ok {
				retry.Reset()
				break
			}
			err := p.patcher.Patch(ctx, v)
			if err == nil {
				// since was read before the patch: the Node watch may
				// already have shown the write (Live), clearing p.since.
				if !since.IsZero() {
					metricLatency.Observe(p.clock.Since(since).Seconds())
				}
				p.mu.Lock()
				p.live = v
				p.writes++
				p.since = time.Time{}
				p.noteDifference() // a newer value waits from now
				p.mu.Unlock()
				metricPublishes.Inc()
				retry.Reset()
				break
			}
			if ctx.Err() != nil {
				return
			}
			metricErrors.Inc()
			wait := retry.Next()
			p.log.Warn("publishing digest failed; retrying", "err", err, "in", wait.Round(time.Millisecond))
			if !backoff.Sleep(ctx, p.clock, wait) {
				return
			}
		}
	}
}

// await takes a write permit from the budget, waiting for one if it is spent:
// one log line when it starts to bite, the metric on every wait. The value
// written after the wait is the latest.
func (p *Publisher) await(ctx context.Context) bool {
	if p.budget == nil {
		return true
	}
	if _, _, ok := p.pending(); !ok {
		return true
	}
	now := p.clock.Now()
	r := p.budget.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	if wait <= 0 {
		p.biting = false
		return true
	}
	metricThrottled.Inc()
	if !p.biting {
		p.biting = true
		p.log.Warn(fmt.Sprintf("digest changing faster than the write budget (%d at once, then %g a minute); publishing the latest every %s until it settles",
			p.cfg.Burst, p.cfg.PerMinute, (time.Duration(float64(time.Minute) / p.cfg.PerMinute)).Round(time.Second)))
	}
	return backoff.Sleep(ctx, p.clock, wait)
}
