// Command writer is the leader-elected Deployment that aggregates the agents' node
// digests into DynamicPrefix status and the pools that follow them, writing only
// when the rendered result differs from what is live. This file is wiring: the
// work is in internal/writer.
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
	"slices"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/logs"
	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/requests"
	"github.com/renumber/renumber/internal/writer/cilium"
	"github.com/renumber/renumber/internal/writer/election"
	"github.com/renumber/renumber/internal/writer/event"
	"github.com/renumber/renumber/internal/writer/kube"
	"github.com/renumber/renumber/internal/writer/kubevip"
	"github.com/renumber/renumber/internal/writer/pipeline"
	"github.com/renumber/renumber/internal/writer/reconcile"
	"github.com/renumber/renumber/internal/writer/service"
	"github.com/renumber/renumber/internal/writer/staleness"
)

type options struct {
	kubeconfig, metricsAddr string
	election                election.Config
	reconcile               reconcile.Config
	nodeGrace, staleness    time.Duration
	pprof, dryRun           bool
	l2Nudge, ciliumNS       string
	kubeVIP                 string
}

func main() {
	var o options
	e, r := &o.election, &o.reconcile
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster)")
	e.Flags(flag.CommandLine)
	flag.DurationVar(&r.Debounce, "debounce", 100*time.Millisecond, "how long to gather node digest changes into one pass")
	flag.StringVar(&o.metricsAddr, "metrics-addr", ":9471", "address for /metrics, /healthz and /readyz")
	flag.BoolVar(&o.dryRun, "dry-run", false, "shadow mode: watch and decide like a leader, but never take the Lease and never write; log each write it would make and serve them at /debug/plan")
	flag.BoolVar(&o.pprof, "pprof", false, "also serve Go profiles under /debug/pprof/ on the metrics address (for benchmarks; do not expose)")
	flag.DurationVar(&o.nodeGrace, "node-not-ready-grace", 5*time.Minute, "a Node not Ready for longer stops voting for prefixes (0: Nodes always vote, and only their metadata is watched)")
	flag.DurationVar(&o.staleness, "staleness-check", 2*time.Minute, "how often to compare the caches with the API server (reads only); 0 disables")
	r.Budget.Flags(flag.CommandLine)
	r.TargetKeys = service.DefaultTargetKeys
	flag.Func("external-dns-target-annotation-keys", "comma-separated annotation keys HA Services get their DNS target under, in order; a key dropped from the list is released (default "+strings.Join(service.DefaultTargetKeys, ",")+")",
		func(v string) error { r.TargetKeys = service.Split(v); return nil })
	flag.StringVar(&o.l2Nudge, "l2-nudge", "auto", "touch HA Services once when their load balancer publishes a new address, for Cilium's L2 announcer (before v1.20.1 it misses added addresses): auto (from the Cilium DaemonSet's image), always or never")
	flag.StringVar(&o.ciliumNS, "cilium-namespace", "kube-system", "namespace of the Cilium DaemonSet (labelled "+cilium.DaemonSetSelector+"), read with --l2-nudge=auto")
	flag.StringVar(&o.kubeVIP, "kube-vip-configmap", "", "follow the kube-vip cloud provider's pool ConfigMap, as namespace/name (usually "+kubevip.DefaultConfigMap+"; needs the Role in manifests/kube-vip); empty: not followed")
	newLog := logs.Flags(flag.CommandLine)
	flag.Parse()
	log, err := newLog()
	if err == nil {
		err = errors.Join(r.Budget.Validate(), e.Validate(), service.CheckTargetKeys(r.TargetKeys))
		if o.kubeVIP != "" {
			err = errors.Join(err, kubevip.CheckConfigMap(o.kubeVIP))
		}
		if !slices.Contains(cilium.L2NudgeModes, o.l2Nudge) {
			err = errors.Join(err, fmt.Errorf("--l2-nudge %q: want one of %s", o.l2Nudge, strings.Join(cilium.L2NudgeModes, ", ")))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// client-go's reflectors and leader election log through klog: keep one stream.
	klog.SetSlogLogger(log.With("from", "client-go"))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, o); err != nil {
		log.Error("writer failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, o options) error {
	counter := requests.NewCounter("writer")
	base, err := kube.Config(o.kubeconfig, "renumber-writer/"+o.election.Identity)
	if err != nil {
		return err
	}
	// The Lease client is counted but not gated: it writes before leading.
	leases, err := coordinationv1.NewForConfig(kube.Counted(base, counter, nil))
	if err != nil {
		return err
	}
	elector, err := election.New(o.election, leases, log)
	if err != nil {
		return err
	}
	gate := &elector.Gate
	if o.dryRun {
		gate = &election.Gate{} // never opens: a write that slipped through is refused before it leaves
	}
	cl, err := kube.NewClients(kube.Counted(base, counter, gate))
	if err != nil {
		return err
	}
	clk := clock.RealClock{}
	rec := &event.Recorder{Client: cl.Events, Component: "renumber-writer", Instance: o.election.Identity, Clock: clk, Log: log}
	p := pipeline.New(pipeline.Options{NodeGrace: o.nodeGrace, L2Nudge: o.l2Nudge, CiliumNamespace: o.ciliumNS,
		KubeVIP: o.kubeVIP, Reconcile: o.reconcile, DryRun: o.dryRun}, cl, rec, clk, log)
	c, ctl := p.Caches, p.Controller
	collectors := []metrics.Collector{counter}
	healthy, extra := elector.Check, map[string]http.HandlerFunc{}
	if o.dryRun {
		collectors = append(collectors, p.Plan.Collector())
		healthy, extra["/debug/plan"] = func() error { return nil }, p.Plan.ServeHTTP
	} else {
		collectors = append(collectors, elector.Collectors()...)
	}
	reg := metrics.NewRegistry(slices.Concat(collectors, reconcile.Collectors(), staleness.Collectors(),
		p.Ballot.Collectors(), []metrics.Collector{ctl.Collector()})...)
	go serve(ctx, log, o, reg, healthy, c.Synced, extra)
	if !c.Run(ctx, ctl) {
		return nil // shutting down before the caches synced
	}
	if len(c.Kinds()) == 0 {
		log.Warn("no pool kinds served yet (Cilium or MetalLB); only DynamicPrefix status will be written until one is installed")
	}
	if o.staleness > 0 {
		go (&staleness.Checker{Lister: cl.Metadata, Caches: c.All, Clock: clk, Log: log}).Run(ctx, o.staleness)
	}
	if o.dryRun {
		log.Info("writer started in dry-run mode: planning, never writing", "identity", o.election.Identity, "kinds", c.Kinds())
		ctl.Lead(ctx) // every pass, no Lease: the plan records its writes
		return nil
	}
	log.Info("writer started", "identity", o.election.Identity, "kinds", c.Kinds(),
		"lease", o.election.LeaseDuration, "renew", o.election.RenewDeadline, "retry", o.election.RetryPeriod)
	elector.Run(ctx, ctl.Lead)
	return nil
}

func serve(ctx context.Context, log *slog.Logger, o options, reg *metrics.Registry, healthy func() error, synced func() bool, extra map[string]http.HandlerFunc) {
	readyz := func(*http.Request) error {
		if !synced() {
			return errors.New("caches not synced")
		}
		return nil
	}
	if o.pprof {
		extra["/debug/pprof/"], extra["/debug/pprof/profile"] = pprof.Index, pprof.Profile
	}
	if err := metrics.Serve(ctx, log, o.metricsAddr, reg, func(*http.Request) error { return healthy() }, readyz, extra); err != nil {
		log.Error("metrics server stopped", "err", err)
	}
}
