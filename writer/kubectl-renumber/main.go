// Command kubectl-renumber is `kubectl renumber status` (also installed as
// renumber-status) and `kubectl renumber handover` (handover.go: back to the
// existing operator). Status: for each DynamicPrefix, the current prefix and why, the
// nodes' votes, draining prefixes, whether every object that follows it holds
// what the writer would write now, and who holds the writer's Lease. It runs
// the writer's own pipeline as a shadow, once (or again on --watch), and
// only reads: its writes are refused before they leave, and it needs no more
// than the renumber-reader role (manifests/reader).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/requests"
	"github.com/renumber/renumber/internal/writer/election"
	"github.com/renumber/renumber/internal/writer/event"
	"github.com/renumber/renumber/internal/writer/inspect"
	"github.com/renumber/renumber/internal/writer/kube"
	"github.com/renumber/renumber/internal/writer/pipeline"
)

type options struct {
	kubeconfig, output, namespace, lease string
	watch                                bool
	interval, timeout                    time.Duration
	pipeline                             pipeline.Options
}

// usage is `kubectl renumber --help`.
const usage = `kubectl renumber - what renumber does with your IPv6 prefixes

Usage:
  kubectl renumber status [flags]     each DynamicPrefix: the current prefix and why,
                                      the nodes' votes, draining prefixes, whether every
                                      pool and Service holds what it should, the leader
  kubectl renumber handover [flags]   hand what renumber wrote back to the existing
                                      operator (dynamic-prefix.io), before switching back

Run "kubectl renumber <command> --help" for a command's flags.

Exit status of status (without --watch): 0 when every object is in sync and no
DynamicPrefix is Degraded, 3 when one is not (the problems are listed on
stderr), 1 when the cluster could not be read, 2 for a usage error.
`

// exitProblems is kubectl renumber status's exit status when something is
// Degraded or out of sync.
const exitProblems = 3

func main() {
	args := os.Args[1:]
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
			fmt.Print(usage)
			return
		}
	}
	if len(args) > 0 && args[0] == "handover" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		err := runHandover(ctx, os.Stdout, args[1:])
		stop()
		switch {
		case errors.Is(err, flag.ErrHelp):
		case err != nil:
			fmt.Fprintln(os.Stderr, "renumber handover:", err)
			os.Exit(1)
		}
		return
	}
	switch {
	case len(args) > 0 && args[0] == "status":
		args = args[1:]
	case strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-"):
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", args[0], usage)
		os.Exit(2)
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(os.Stderr, "unknown command %q: the commands are status and handover\n", args[0])
		os.Exit(2)
	}
	var o options
	fs := flag.NewFlagSet("renumber-status", flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)")
	fs.StringVar(&o.output, "o", "text", "output format: text or json")
	fs.BoolVar(&o.watch, "watch", false, "print again whenever the answer changes")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "with --watch, how often to look")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for the first complete read")
	fs.StringVar(&o.namespace, "namespace", "renumber-system", "the writer's namespace (its Lease)")
	fs.StringVar(&o.lease, "lease", "renumber-writer", "the writer's Lease")
	// What the writer would write depends on its flags: pass them as it runs.
	o.pipeline.Flags(fs)
	// A person should not wait the writer's 30 s when their role cannot read it.
	o.pipeline.CiliumWait = 3 * time.Second
	_ = fs.Parse(args)
	err := o.pipeline.Validate()
	if o.output != "text" && o.output != "json" {
		err = errors.Join(err, fmt.Errorf("-o %q: want text or json", o.output))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	klog.SetSlogLogger(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	problems, err := run(ctx, os.Stdout, log, o)
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "renumber status:", err)
		os.Exit(1)
	}
	if len(problems) > 0 && !o.watch {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "renumber status:", p)
		}
		os.Exit(exitProblems)
	}
}

// run prints the report (again on every change with --watch) and returns
// the problems of the last one.
func run(ctx context.Context, out io.Writer, log *slog.Logger, o options) ([]string, error) {
	base, err := restConfig(o.kubeconfig, "renumber-status")
	if err != nil {
		return nil, err
	}
	// An API server that cannot be reached is said at once, not after the
	// cache timeout (which would blame the identity's role).
	if err := reachable(ctx, base); err != nil {
		return nil, err
	}
	// A gate that never opens: whatever the pipeline would write is refused
	// before it leaves.
	ro := kube.Counted(base, requests.NewCounter("status"), &election.Gate{})
	cl, err := kube.NewClients(ro)
	if err != nil {
		return nil, err
	}
	leases, err := coordinationv1.NewForConfig(ro)
	if err != nil {
		return nil, err
	}
	clk := clock.RealClock{}
	o.pipeline.DryRun = true
	p := pipeline.New(o.pipeline, cl, &event.Recorder{Clock: clk, Log: log}, clk, log)
	synced := make(chan bool, 1)
	go func() { synced <- p.Caches.Run(ctx, p.Controller) }()
	select {
	case ok := <-synced:
		if !ok {
			return nil, ctx.Err()
		}
	case <-time.After(o.timeout):
		return nil, fmt.Errorf("nothing read after %s: can this identity read what the writer reads (the renumber-reader role)?", o.timeout)
	}

	var last []byte
	for {
		r := inspect.Build(inspect.Gather(ctx, p, lease(ctx, leases, o), clk.Now()))
		var b bytes.Buffer
		if o.output == "json" {
			enc := json.NewEncoder(&b)
			enc.SetIndent("", "  ")
			err = enc.Encode(r)
		} else {
			err = r.Text(&b, clk.Now())
		}
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(b.Bytes(), last) || !o.watch {
			if last != nil && o.output == "text" {
				fmt.Fprintf(out, "\n--- %s\n", clk.Now().Format(time.TimeOnly))
			}
			if _, err := out.Write(b.Bytes()); err != nil {
				return nil, err
			}
			last = b.Bytes()
		}
		if !o.watch {
			return r.Problems(), nil
		}
		select {
		case <-ctx.Done():
			return r.Problems(), nil
		case <-time.After(o.interval):
		}
	}
}

// restConfig loads the kubeconfig (explicit, else $KUBECONFIG, ~/.kube/config,
// in-cluster) for a client calling itself agent.
func restConfig(kubeconfig, agent string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = agent
	return cfg, nil
}

// reachable asks the API server for its version, within 10 s.
func reachable(ctx context.Context, cfg *rest.Config) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return err
	}
	if _, err := dc.ServerVersion(); err != nil {
		return fmt.Errorf("cannot reach the API server at %s: %w", cfg.Host, err)
	}
	return ctx.Err()
}

// lease reads the writer's Lease; an error is reported as its holder.
func lease(ctx context.Context, c coordinationv1.LeasesGetter, o options) *inspect.Lease {
	l, err := c.Leases(o.namespace).Get(ctx, o.lease, metav1.GetOptions{})
	if err != nil {
		return &inspect.Lease{Holder: "unknown (" + err.Error() + ")"}
	}
	out := &inspect.Lease{Holder: "nobody"}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		out.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		t := l.Spec.RenewTime.UTC()
		out.RenewedAt = &t
	}
	return out
}
