// Command writer is the leader-elected Deployment that aggregates the agents' node
// digests into DynamicPrefix status and the pools that follow them, writing only
// when the rendered result differs from what is live.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/logs"
	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/requests"
	"github.com/renumber/renumber/internal/writer/budget"
	"github.com/renumber/renumber/internal/writer/cilium"
	"github.com/renumber/renumber/internal/writer/election"
	"github.com/renumber/renumber/internal/writer/event"
	"github.com/renumber/renumber/internal/writer/kube"
	"github.com/renumber/renumber/internal/writer/metallb"
	"github.com/renumber/renumber/internal/writer/reconcile"
)

func main() {
	host, _ := os.Hostname()
	var (
		kubeconfig  = flag.String("kubeconfig", "", "kubeconfig file (default: in-cluster)")
		namespace   = flag.String("namespace", envOr("POD_NAMESPACE", "renumber-system"), "namespace of the leader election Lease")
		identity    = flag.String("identity", envOr("POD_NAME", host), "this replica's name in the Lease")
		leaseName   = flag.String("lease-name", "renumber-writer", "name of the leader election Lease")
		lease       = flag.Duration("lease-duration", 60*time.Second, "how long a lease is valid without renewal")
		renew       = flag.Duration("renew-deadline", 40*time.Second, "how long the leader keeps trying to renew before it stops writing")
		retry       = flag.Duration("retry-period", 5*time.Second, "interval between lease renewals (the only writes at steady state)")
		debounce    = flag.Duration("debounce", 100*time.Millisecond, "how long to gather node digest changes into one pass")
		metricsAddr = flag.String("metrics-addr", ":9471", "address for /metrics, /healthz and /readyz")
		profiles    = flag.Bool("pprof", false, "also serve Go profiles under /debug/pprof/ on the metrics address (for benchmarks; do not expose)")
		nodeGrace   = flag.Duration("node-not-ready-grace", 5*time.Minute, "a Node not Ready for longer stops voting for prefixes (0: Nodes always vote, and only their metadata is watched)")
		staleness   = flag.Duration("staleness-check", 2*time.Minute, "how often to compare the caches with the API server (reads only); 0 disables")
		limits      budget.Limits
	)
	flag.IntVar(&limits.ObjectBurst, "budget-object-burst", 5, "write-storm breaker: writes one object may take at once")
	flag.Float64Var(&limits.ObjectPerMinute, "budget-object-per-minute", 2, "write-storm breaker: sustained writes per object per minute")
	flag.IntVar(&limits.TotalBurst, "budget-total-burst", 200, "write-storm breaker: writes of all objects at once (a prefix change writes each managed object once)")
	flag.Float64Var(&limits.TotalPerMinute, "budget-total-per-minute", 60, "write-storm breaker: sustained writes of all objects per minute")
	newLog := logs.Flags(flag.CommandLine)
	flag.Parse()
	log, err := newLog()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// client-go's reflectors and leader election log through klog: keep one stream.
	klog.SetSlogLogger(log.With("from", "client-go"))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg := election.Config{Namespace: *namespace, Name: *leaseName, Identity: *identity,
		LeaseDuration: *lease, RenewDeadline: *renew, RetryPeriod: *retry}
	if err := limits.Validate(); err != nil {
		log.Error("invalid flags", "err", err)
		os.Exit(2)
	}
	if err := run(ctx, log, *kubeconfig, cfg, reconcile.Config{Debounce: *debounce, Budget: limits, Staleness: *staleness, NodeGrace: *nodeGrace}, *metricsAddr, *profiles); err != nil {
		log.Error("writer failed", "err", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, log *slog.Logger, kubeconfig string, ecfg election.Config, rcfg reconcile.Config, metricsAddr string, profiles bool) error {
	counter := requests.NewCounter("writer")
	base, err := kube.Config(kubeconfig, "renumber-writer/"+ecfg.Identity)
	if err != nil {
		return err
	}
	// The Lease client is counted but not gated: it writes before leading.
	// Typed clients per API group, not the whole clientset, and kube.Discovery
	// instead of client-go's: the clientset made every group's client code
	// reachable (with the discovery client, 8 MB of binary and of RSS).
	leaseClient, err := coordinationv1.NewForConfig(kube.Counted(base, counter, nil))
	if err != nil {
		return err
	}
	elector, err := election.New(ecfg, leaseClient, log)
	if err != nil {
		return err
	}
	gated := kube.Counted(base, counter, &elector.Gate)
	dyn, err := dynamic.NewForConfig(gated)
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(gated)
	if err != nil {
		return err
	}
	disc, err := kube.NewDiscovery(gated)
	if err != nil {
		return err
	}
	events, err := eventsv1.NewForConfig(gated)
	if err != nil {
		return err
	}
	// Pool kinds are looked up again whenever a CRD of these groups changes.
	rcfg.BackendGroups = []string{"cilium.io", "metallb.io"}
	discover := func() (reconcile.Served, error) {
		c, bgp, err1 := cilium.Discover(disc)
		m, err2 := metallb.Kinds(disc)
		return reconcile.Served{Pools: append(c, m...), BGP: bgp}, errors.Join(err1, err2)
	}
	clk := clock.RealClock{}
	rec := &event.Recorder{Client: events, Component: "renumber-writer", Instance: ecfg.Identity, Clock: clk, Log: log}
	protoCfg := rest.CopyConfig(gated)
	protoCfg.ContentType = "application/vnd.kubernetes.protobuf"
	protoCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	typed, err := corev1.NewForConfig(protoCfg)
	if err != nil {
		return err
	}
	r := reconcile.New(rcfg, dyn, meta, typed, discover, clk, log, rec)

	reg := metrics.NewRegistry(append(append(elector.Collectors(), reconcile.Collectors()...), counter, r.Collector())...)
	go func() {
		healthz := func(*http.Request) error { return elector.Check() }
		readyz := func(*http.Request) error {
			if !r.Synced() {
				return errors.New("caches not synced")
			}
			return nil
		}
		var extra map[string]http.HandlerFunc
		if profiles {
			extra = map[string]http.HandlerFunc{"/debug/pprof/": pprof.Index, "/debug/pprof/profile": pprof.Profile}
		}
		if err := metrics.Serve(ctx, log, metricsAddr, reg, healthz, readyz, extra); err != nil {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	if !r.Run(ctx) {
		return nil // shutting down before the caches synced
	}
	if len(r.Kinds()) == 0 {
		log.Warn("no pool kinds served yet (Cilium or MetalLB); only DynamicPrefix status will be written until one is installed")
	}
	log.Info("writer started", "identity", ecfg.Identity, "kinds", r.Kinds(),
		"lease", ecfg.LeaseDuration, "renew", ecfg.RenewDeadline, "retry", ecfg.RetryPeriod)
	if rcfg.Staleness > 0 {
		go r.CheckStaleness(ctx, rcfg.Staleness)
	}
	elector.Run(ctx, r.Lead)
	return nil
}
