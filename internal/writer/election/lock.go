package election

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/renumber/renumber/internal/metrics"
)

// countingLock wraps the Lease lock to see every acquire/renew attempt (each
// begins with a Get) and its outcome: client-go exposes no such metric.
type countingLock struct {
	resourcelock.Interface
	lastSuccess atomic.Int64 // unix nanoseconds of the last successful Update/Create
	now         func() time.Time
}

func (l *countingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	metricAttempts.Inc()
	r, b, err := l.Interface.Get(ctx)
	if err != nil && !isNotFound(err) {
		metricFailures.Inc()
	}
	return r, b, err
}

func (l *countingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.done(l.Interface.Create(ctx, ler))
}

func (l *countingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.done(l.Interface.Update(ctx, ler))
}

func (l *countingLock) done(err error) error {
	if err != nil {
		metricFailures.Inc()
		return err
	}
	l.lastSuccess.Store(l.now().UnixNano())
	return nil
}

// sinceRenew is the age of the last successful Lease write, for the leader only.
func (e *Elector) sinceRenew() float64 {
	last := e.lock.lastSuccess.Load()
	if !e.Gate.Open() || last == 0 {
		return 0
	}
	return time.Since(time.Unix(0, last)).Seconds()
}

var (
	metricAttempts = metrics.NewCounter("renumber_writer_lease_attempts_total", "Lease acquire/renew attempts (one per retry period).")
	metricFailures = metrics.NewCounter("renumber_writer_lease_failures_total", "Lease reads or writes that failed (API server slow or unreachable, conflicts).")
)
