// Package publish keeps one annotation on the agent's own Node equal to the latest
// digest: it writes only when the live value differs, debounces bursts so one
// network change is one write, restores a value someone removed or altered, and
// retries API errors with exponential backoff while observation goes on.
package publish

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/backoff"
)

// Patcher writes the annotation on the node (a merge patch of that key only).
type Patcher interface {
	Patch(ctx context.Context, value string) error
}

// Publisher publishes the wanted value when it differs from the live one.
type Publisher struct {
	patcher  Patcher
	clock    clock.Clock
	log      *slog.Logger
	debounce time.Duration
	retry    func() *backoff.Backoff

	mu        sync.Mutex
	want      string
	haveWant  bool
	live      string
	liveKnown bool
	kick      chan struct{}
	writes    int
}

// New returns a publisher. debounce is how long the wanted value must stay put
// before it is written.
func New(p Patcher, clk clock.Clock, log *slog.Logger, debounce time.Duration) *Publisher {
	return &Publisher{
		patcher: p, clock: clk, log: log, debounce: debounce,
		retry: func() *backoff.Backoff { return backoff.New(500*time.Millisecond, 30*time.Second) },
		kick:  make(chan struct{}, 1),
	}
}

// Want sets the value the node should carry.
func (p *Publisher) Want(v string) {
	p.mu.Lock()
	changed := !p.haveWant || p.want != v
	p.want, p.haveWant = v, true
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
	p.mu.Unlock()
	if changed {
		p.poke()
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

// pending returns the value to write, if any.
func (p *Publisher) pending() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.haveWant || !p.liveKnown || p.want == p.live {
		return "", false
	}
	return p.want, true
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
		// Debounce: let the burst settle (each new kick restarts the quiet period).
	settle:
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.kick:
			case <-p.clock.After(p.debounce):
				break settle
			}
		}
		for {
			v, ok := p.pending()
			if !ok {
				retry.Reset()
				break
			}
			err := p.patcher.Patch(ctx, v)
			if err == nil {
				p.mu.Lock()
				p.live = v
				p.writes++
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
