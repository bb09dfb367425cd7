// Package election runs client-go leader election on a Lease for as long as the
// process lives: losing the lease stops the leader's work at once and campaigns
// again in the same process; it never exits. Gate is open only while leading,
// and closes before the work's context is cancelled, so no write starts after the
// loss is known.
package election

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/renumber/renumber/internal/metrics"
)

// Config of the election. Defaults suit a slow API server: client-go's 15/10/2 s
// lost leases during 10-30 s storage stalls in real incidents.
type Config struct {
	Namespace, Name, Identity string
	LeaseDuration             time.Duration // 60 s
	RenewDeadline             time.Duration // 40 s
	RetryPeriod               time.Duration // 5 s
}

// Flags registers the election's flags on fs, filling c (defaults: the values
// above; identity from $POD_NAME, namespace from $POD_NAMESPACE).
func (c *Config) Flags(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&c.Namespace, "namespace", envOr("POD_NAMESPACE", "renumber-system"), "namespace of the leader election Lease")
	fs.StringVar(&c.Identity, "identity", envOr("POD_NAME", host), "this replica's name in the Lease")
	fs.StringVar(&c.Name, "lease-name", "renumber-writer", "name of the leader election Lease")
	fs.DurationVar(&c.LeaseDuration, "lease-duration", 60*time.Second, "how long a lease is valid without renewal")
	fs.DurationVar(&c.RenewDeadline, "renew-deadline", 40*time.Second, "how long the leader keeps trying to renew before it stops writing")
	fs.DurationVar(&c.RetryPeriod, "retry-period", 5*time.Second, "interval between lease renewals (the only writes at steady state)")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Validate checks the timing rules client-go relies on.
func (c Config) Validate() error {
	switch {
	case c.Namespace == "" || c.Name == "" || c.Identity == "":
		return errors.New("election: namespace, name and identity are required")
	case c.RetryPeriod <= 0:
		return errors.New("election: retry period must be positive")
	case c.RenewDeadline <= c.RetryPeriod:
		return fmt.Errorf("election: renew deadline %s must exceed the retry period %s", c.RenewDeadline, c.RetryPeriod)
	case c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("election: lease duration %s must exceed the renew deadline %s", c.LeaseDuration, c.RenewDeadline)
	}
	return nil
}

// Gate reports whether this process leads right now.
type Gate struct{ open atomic.Bool }

// Open implements requests.Gate.
func (g *Gate) Open() bool { return g.open.Load() }

// Elector campaigns forever.
type Elector struct {
	cfg     Config
	log     *slog.Logger
	Gate    Gate
	checker *leaderelection.HealthzAdaptor
	lock    *countingLock

	sinceRenewal metrics.Collector
}

// New returns an elector whose Lease client uses cfg, which must not go
// through the write gate (the Lease itself is written while not yet leading).
func New(cfg Config, rc *rest.Config, log *slog.Logger) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	client, err := coordinationv1.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	metricDeadlines.With("lease_duration").Set(cfg.LeaseDuration.Seconds())
	metricDeadlines.With("renew_deadline").Set(cfg.RenewDeadline.Seconds())
	metricDeadlines.With("retry_period").Set(cfg.RetryPeriod.Seconds())
	e := &Elector{cfg: cfg, log: log, checker: leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)}
	e.lock = &countingLock{now: time.Now, maxDuration: cfg.LeaseDuration, Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}}
	e.sinceRenewal = metrics.NewGaugeFunc("renumber_writer_lease_seconds_since_renewal", "On the leader, seconds since its last successful Lease write (0 on standbys).", e.sinceRenew)
	return e, nil
}

// Check is a health check that fails when this process holds a lease it has not
// managed to renew for longer than the lease duration plus a margin.
func (e *Elector) Check() error { return e.checker.Check(nil) }

// Run campaigns until ctx ends; lead runs while leading, with a context that is
// cancelled the moment leadership is lost.
func (e *Elector) Run(ctx context.Context, lead func(context.Context)) {
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            e.lock,
			LeaseDuration:   e.cfg.LeaseDuration,
			RenewDeadline:   e.cfg.RenewDeadline,
			RetryPeriod:     e.cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            e.cfg.Name,
			WatchDog:        e.checker,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					e.Gate.open.Store(true)
					metricLeader.Set(1)
					metricTransitions.Inc()
					e.log.Info("leading", "identity", e.cfg.Identity)
					lead(lctx)
				},
				OnStoppedLeading: func() {
					e.Gate.open.Store(false)
					metricLeader.Set(0)
				},
				OnNewLeader: func(id string) {
					if id != e.cfg.Identity {
						e.log.Info("following", "leader", id)
					}
				},
			},
		})
		if err != nil {
			e.log.Error("leader election misconfigured", "err", err)
			return
		}
		le.Run(ctx) // returns when leadership is lost or ctx ends
		e.Gate.open.Store(false)
		metricLeader.Set(0)
		if ctx.Err() == nil {
			metricLost.Inc()
			e.log.Warn("lost the lease; writes stopped, campaigning again")
		}
	}
}

var (
	metricLeader      = metrics.NewGauge("renumber_writer_is_leader", "1 while this replica leads.")
	metricTransitions = metrics.NewCounter("renumber_writer_leadership_acquired_total", "Times this replica became leader.")
	metricLost        = metrics.NewCounter("renumber_writer_leadership_lost_total", "Times this replica lost the lease while running.")
	metricDeadlines   = metrics.NewGaugeVec("renumber_writer_leader_election_seconds", "Configured leader election timings.", "setting")
)

// Collectors returns the election's metrics.
func (e *Elector) Collectors() []metrics.Collector {
	return []metrics.Collector{metricLeader, metricTransitions, metricLost, metricDeadlines, metricAttempts, metricFailures, e.sinceRenewal}
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
