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
	"syscall"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/logs"
	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/requests"
	"github.com/renumber/renumber/internal/version"
	"github.com/renumber/renumber/internal/writer/apply"
	"github.com/renumber/renumber/internal/writer/caches"
	"github.com/renumber/renumber/internal/writer/controller"
	"github.com/renumber/renumber/internal/writer/election"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/review"
)

type options struct {
	kubeconfig, metricsAddr, metricsAuth, audience, metricsCA string
	election                                                  election.Config
	pipeline                                                  controller.Options
	staleness                                                 time.Duration
	pprof                                                     bool
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster)")
	o.election.Flags(flag.CommandLine)
	o.pipeline.Flags(flag.CommandLine)
	flag.StringVar(&o.metricsAddr, "metrics-addr", "127.0.0.1:9471", "address for /metrics, /healthz and /readyz (loopback by default; the manifests and the chart listen on the Pod's address, :9471)")
	flag.StringVar(&o.audience, "metrics-audience", metrics.Audience, "with --metrics-auth=kubernetes: the audience a scraper's token must be minted for (a projected ServiceAccount token with this audience: good for renumber's metrics and nothing else); empty: the API server's own (any token it accepts, also Prometheus's own ServiceAccount token)")
	flag.StringVar(&o.metricsCA, "metrics-ca", "", "with --metrics-auth=kubernetes: a directory holding the install's metrics CA (tls.crt, tls.key: the Secret renumber-metrics-ca), which signs this process's certificate for the name renumber-metrics at start, so that a scraper can verify it; unset or unreadable: a self-signed certificate no scraper can verify")
	flag.StringVar(&o.metricsAuth, "metrics-auth", "none", "who may scrape /metrics and /debug/: none (anyone who reaches the address), or kubernetes (HTTPS with a certificate made at start, and only a bearer token the API server says may get /metrics, by TokenReview and SubjectAccessReview)")
	flag.BoolVar(&o.pipeline.DryRun, "dry-run", false, "shadow mode: watch and decide like a leader, but never take the Lease and never write; log each write it would make and serve them at /debug/plan")
	flag.BoolVar(&o.pprof, "pprof", false, "also serve Go profiles under /debug/pprof/ on the metrics address (for benchmarks; do not expose)")
	flag.DurationVar(&o.staleness, "staleness-check", 2*time.Minute, "how often to compare the caches with the API server (reads only); 0 disables")
	newLog := logs.Flags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println("writer " + version.Get().String())
		return
	}
	log, err := newLog()
	if err == nil {
		err = errors.Join(o.election.Validate(), o.pipeline.Validate())
	}
	if err == nil && o.metricsAuth != "none" && o.metricsAuth != "kubernetes" {
		err = fmt.Errorf("--metrics-auth %q: none or kubernetes", o.metricsAuth)
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
	base, err := controller.RESTConfig(o.kubeconfig, "renumber-writer/"+o.election.Identity)
	if err != nil {
		return err
	}
	// The Lease is counted but not gated: it is written before leading.
	elector, err := election.New(o.election, controller.Counted(base, counter, nil), log)
	if err != nil {
		return err
	}
	dryRun := o.pipeline.DryRun
	gate := &elector.Gate
	if dryRun {
		gate = &election.Gate{} // never opens: a write that slipped through is refused before it leaves
	}
	cl, err := controller.NewClients(controller.Counted(base, counter, gate))
	if err != nil {
		return err
	}
	clk := clock.RealClock{}
	rec := &apply.EventRecorder{Client: cl.Events, Component: "renumber-writer", Instance: o.election.Identity, Clock: clk, Log: log,
		Budget: permit.NewEventBudget(o.pipeline.Reconcile.Budget), OwnBudget: permit.NewEventBudget(o.pipeline.Reconcile.Budget)}
	p := controller.NewPipeline(o.pipeline, cl, rec, clk, log)
	c, ctl := p.Caches, p.Controller
	collectors := append(p.Collectors(), counter)
	healthy, extra := elector.Check, map[string]http.HandlerFunc{}
	if dryRun {
		healthy, extra["/debug/plan"] = func() error { return nil }, p.Plan.ServeHTTP
	} else {
		collectors = append(collectors, elector.Collectors()...)
	}
	if o.pprof {
		extra["/debug/pprof/"], extra["/debug/pprof/profile"] = pprof.Index, pprof.Profile
	}
	ep := metrics.Endpoint{Addr: o.metricsAddr, Conns: metrics.NewConns("writer")}
	collectors = append(collectors, ep.Conns)
	if o.metricsAuth == "kubernetes" {
		var audiences []string
		if o.audience != "" {
			audiences = []string{o.audience}
		}
		r, err := review.New(base, audiences)
		if err != nil {
			return err
		}
		if ep.TLS, err = metrics.Certificate(log, o.metricsCA, "renumber-writer."+o.election.Identity, clk.Now()); err != nil {
			return err
		}
		ep.Guard = metrics.NewGuard(r, clk, "writer")
		collectors = append(collectors, ep.Guard)
	}
	reg := metrics.NewRegistry(collectors...)
	metrics.Start(ctx, log, ep, reg, func(*http.Request) error { return healthy() }, c.Ready, extra)
	if !c.Run(ctx, ctl) {
		return nil // shutting down before the caches synced
	}
	if o.staleness > 0 {
		go (&caches.Checker{Lister: cl.Metadata, Caches: c.All, Clock: clk, Log: log}).Run(ctx, o.staleness)
	}
	if dryRun {
		log.Info("writer started in dry-run mode: planning, never writing", "identity", o.election.Identity, "kinds", c.Kinds())
		ctl.Lead(ctx) // every pass, no Lease: the plan records its writes
		return nil
	}
	log.Info("writer started", "identity", o.election.Identity, "kinds", c.Kinds(),
		"lease", o.election.LeaseDuration, "renew", o.election.RenewDeadline, "retry", o.election.RetryPeriod)
	elector.Run(ctx, ctl.Lead)
	return nil
}
