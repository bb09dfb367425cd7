package election

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/renumber/renumber/internal/metrics"
)

// countingLock wraps the Lease lock to see every acquire/renew attempt (each
// begins with a Get) and its outcome: client-go exposes no such metric. It also
// caps the duration a record claims (below).
type countingLock struct {
	resourcelock.Interface
	lastSuccess atomic.Int64 // unix nanoseconds of the last successful Update/Create
	now         func() time.Time
	maxDuration time.Duration // this replica's --lease-duration
}

func (l *countingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	metricAttempts.Inc()
	r, b, err := l.Interface.Get(ctx)
	if err != nil && !isNotFound(err) {
		metricFailures.Inc()
	}
	if r != nil {
		r.LeaseDurationSeconds = capDuration(r.LeaseDurationSeconds, l.maxDuration)
	}
	return r, b, err
}

// capDuration is the time a replica waits for a holder it does not see renew.
// client-go believes the record's leaseDurationSeconds, counted from when it
// saw the raw record change (it never reads renewTime or acquireTime for
// expiry): one update by a stolen writer token naming another holder for 68
// years would stop every writer for that long, the token long revoked. No
// honest writer claims more than this replica's own --lease-duration (the
// replicas of one install share it), so a longer claim lapses as a crashed
// writer's does. The raw record stays as read: client-go compares it to see
// a renewal, and a token that keeps renewing holds the Lease while it lives.
func capDuration(seconds int, own time.Duration) int {
	return min(seconds, int(own/time.Second))
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
