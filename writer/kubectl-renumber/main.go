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
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/requests"
	"github.com/renumber/renumber/internal/version"
	"github.com/renumber/renumber/internal/writer/apply"
	"github.com/renumber/renumber/internal/writer/controller"
	"github.com/renumber/renumber/internal/writer/election"
	"github.com/renumber/renumber/internal/writer/inspect"
)

type options struct {
	config                *kubeFlags
	output, writer, lease string
	names                 []string // DynamicPrefixes to report (all when empty)
	watch                 bool
	interval, timeout     time.Duration
	pipeline              *controller.Options
	// writerFlags are the pipeline's flags; set those the command line set.
	writerFlags *flag.FlagSet
	set         map[string]bool
}

// usage is `kubectl renumber --help`.
const usage = `kubectl renumber - what renumber does with your IPv6 prefixes

Usage:
  kubectl renumber status [NAME...] [flags]
                                      each DynamicPrefix (or those named): the current
                                      prefix and why, the nodes' votes, draining prefixes,
                                      whether every pool and Service holds what it should,
                                      the leader
  kubectl renumber handover [flags]   hand what renumber wrote back to the existing
                                      operator (dynamic-prefix.io), before switching back
  kubectl renumber version            this plugin's version (also --version, as the
                                      agent's and the writer's print theirs)

Run "kubectl renumber <command> --help" for a command's flags. Both take
kubectl's connection flags (--kubeconfig, --context, -n/--namespace, --as, ...).

Exit status of status (without --watch): 0 when every object is in sync and no
DynamicPrefix is Degraded, 3 when one is not (the problems are listed on
stderr), 1 when the cluster could not be read, 2 for a usage error.
`

// statusUsage is `kubectl renumber status --help`.
const statusUsage = `kubectl renumber status [NAME...] [flags]

What renumber would write now, read-only, with the renumber-reader role: each
DynamicPrefix (or the ones named), its current prefix and why, the nodes'
votes, draining prefixes, whether every pool and Service is in sync, and who
holds the writer's Lease. It decides as the writer does, with the arguments of
the writer's Deployment (--writer in --namespace); flags given here override
them.

Exit status: 0 in sync, 3 something Degraded or out of sync, 1 the cluster
could not be read, 2 a usage error.

Flags:
`

// writerFlagsUsage heads the writer's flags in status --help.
const writerFlagsUsage = `
The writer's flags (read from its Deployment; one given here overrides it):
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
		var usageErr usageError
		switch {
		case errors.Is(err, pflag.ErrHelp):
		case errors.As(err, &usageErr):
			fmt.Fprintln(os.Stderr, "renumber handover:", err)
			os.Exit(2)
		case err != nil:
			fmt.Fprintln(os.Stderr, "renumber handover:", err)
			os.Exit(1)
		}
		return
	}
	if len(args) > 0 && (args[0] == "version" || args[0] == "--version") { // the agent's and the writer's spelling too
		fmt.Println("kubectl-renumber " + version.Get().String())
		return
	}
	switch {
	case len(args) > 0 && args[0] == "status":
		args = args[1:]
	case strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-"):
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", args[0], usage)
		os.Exit(2)
	}
	o, err := parseStatus(os.Stdout, args)
	if errors.Is(err, pflag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "renumber status:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	klog.SetSlogLogger(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	problems, err := run(ctx, os.Stdout, log, o)
	var usageErr usageError
	if errors.As(err, &usageErr) {
		fmt.Fprintln(os.Stderr, "renumber status:", err)
		os.Exit(2)
	}
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

// usageError is a wrong flag value found once the cluster was read (the
// writer's arguments with the command line's).
type usageError struct{ error }

// parseStatus reads status's command line: kubectl's connection flags, the
// output, the DynamicPrefixes named, and writer flags that override the
// writer Deployment's arguments.
func parseStatus(out io.Writer, args []string) (options, error) {
	o := options{config: newKubeFlags(), set: map[string]bool{}, pipeline: &controller.Options{}}
	fs := pflag.NewFlagSet("status", pflag.ContinueOnError)
	fs.SetOutput(out)
	writerFs := pflag.NewFlagSet("writer", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(out, statusUsage, fs.FlagUsages(), writerFlagsUsage, writerFs.FlagUsages())
	}
	o.config.add(fs)
	fs.StringVarP(&o.output, "output", "o", "text", "output format: text, json or yaml")
	fs.BoolVarP(&o.watch, "watch", "w", false, "print again whenever the answer changes")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "with --watch, how often to look")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for the first complete read")
	fs.StringVar(&o.writer, "writer", "renumber-writer", "the writer's Deployment in --namespace, whose arguments the decision follows (empty: none, the writer's defaults and the flags given here)")
	fs.StringVar(&o.lease, "lease", "renumber-writer", "the writer's Lease in --namespace")
	// What the writer would write depends on its flags: read from its
	// Deployment, or given here.
	o.writerFlags = flag.NewFlagSet("writer", flag.ContinueOnError)
	o.pipeline.Flags(o.writerFlags)
	fs.AddGoFlagSet(o.writerFlags)
	writerFs.AddGoFlagSet(o.writerFlags)
	o.writerFlags.VisitAll(func(f *flag.Flag) { fs.Lookup(f.Name).Hidden = true }) // listed apart
	// A person should not wait the writer's 30 s when their role cannot read it.
	o.pipeline.CiliumWait = 3 * time.Second
	fs.Lookup("namespace").Usage = "the writer's namespace: its Deployment and Lease (default renumber-system)"
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.names = fs.Args()
	o.writerFlags.VisitAll(func(f *flag.Flag) {
		if fs.Changed(f.Name) {
			o.set[f.Name] = true
		}
	})
	if o.config.overrides.Context.Namespace == "" {
		o.config.overrides.Context.Namespace = "renumber-system" // where the chart and manifests install the writer
	}
	if !slices.Contains([]string{"text", "json", "yaml"}, o.output) {
		return o, fmt.Errorf("-o %q: want text, json or yaml", o.output)
	}
	return o, o.pipeline.Validate()
}

// withWriterArgs sets the writer flags of args (a writer container's
// arguments: --name=value, --name value, --bool) that the command line did
// not set; flags the pipeline does not have (the writer's own, such as
// --metrics-addr) are skipped.
func withWriterArgs(fs *flag.FlagSet, set map[string]bool, args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if !hasValue {
			if b, ok := flagValue(f).(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				value = "true"
			} else if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				value = args[i]
			}
		}
		if f == nil || set[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("the writer's argument %s: %w", a, err)
		}
	}
	return nil
}

// flagValue is f's value, nil for no flag.
func flagValue(f *flag.Flag) flag.Value {
	if f == nil {
		return nil
	}
	return f.Value
}

// fromDeployment sets the writer flags the writer Deployment's "writer"
// container is given. No such Deployment (a writer run elsewhere) or no
// right to read it: the writer's defaults and the command line's flags, said
// on log.
func fromDeployment(ctx context.Context, c appsv1client.DeploymentsGetter, log *slog.Logger, o *options) error {
	ns := o.config.overrides.Context.Namespace
	d, err := c.Deployments(ns).Get(ctx, o.writer, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		log.Warn("deciding with the writer's default flags and those given here", "why", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the writer's arguments (--writer %s -n %s): %w", o.writer, ns, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "writer" {
			continue
		}
		if err := withWriterArgs(o.writerFlags, o.set, append(slices.Clone(c.Command), c.Args...)); err != nil {
			return usageError{err}
		}
		if err := o.pipeline.Validate(); err != nil {
			return usageError{err}
		}
		return nil
	}
	return fmt.Errorf("the Deployment %s/%s has no container named writer", ns, o.writer)
}

// run prints the report (again on every change with --watch) and returns
// the problems of the last one.
func run(ctx context.Context, out io.Writer, log *slog.Logger, o options) ([]string, error) {
	base, err := o.config.restConfig("renumber-status")
	if err != nil {
		return nil, err
	}
	// An API server that cannot be reached is said at once, not after the
	// cache timeout (which would blame the identity's role).
	if err := reachable(ctx, base); err != nil {
		return nil, err
	}
	if o.writer != "" {
		apps, err := appsv1client.NewForConfig(base)
		if err != nil {
			return nil, err
		}
		if err := fromDeployment(ctx, apps, log, &o); err != nil {
			return nil, err
		}
	}
	if o.pipeline.KubeVIP != "" && !o.set["kube-vip-configmap"] {
		// The writer's own Role for it is not the reader's: without read
		// access the caches would never fill. Say so, check the rest.
		if err := canWatch(ctx, base, o.pipeline.KubeVIP); err != nil {
			log.Warn("the kube-vip ConfigMap is not checked", "configmap", o.pipeline.KubeVIP, "why", err)
			o.pipeline.KubeVIP = ""
		}
	}
	// A gate that never opens: whatever the pipeline would write is refused
	// before it leaves.
	ro := controller.Counted(base, requests.NewCounter("status"), &election.Gate{})
	cl, err := controller.NewClients(ro)
	if err != nil {
		return nil, err
	}
	leases, err := coordinationv1.NewForConfig(ro)
	if err != nil {
		return nil, err
	}
	clk := clock.RealClock{}
	o.pipeline.DryRun = true
	p := controller.NewPipeline(*o.pipeline, cl, &apply.EventRecorder{Clock: clk, Log: log}, clk, log)
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
		r, err := only(inspect.Build(inspect.Gather(ctx, p, lease(ctx, leases, o), clk.Now(), o.names...)), o.names)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		switch o.output {
		case "json":
			enc := json.NewEncoder(&b)
			enc.SetIndent("", "  ")
			err = enc.Encode(r)
		case "yaml":
			var y []byte
			if y, err = yaml.Marshal(r); err == nil {
				b.Write(y)
			}
		default:
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

// only keeps the DynamicPrefixes named in r (all when none is); a name
// without a DynamicPrefix is an error, as with kubectl get.
func only(r inspect.Report, names []string) (inspect.Report, error) {
	if len(names) == 0 {
		return r, nil
	}
	var kept []inspect.DynamicPrefix
	for _, n := range names {
		i := slices.IndexFunc(r.DynamicPrefixes, func(dp inspect.DynamicPrefix) bool { return dp.Name == n })
		if i < 0 {
			return r, fmt.Errorf("dynamicprefixes.dynamic-prefix.io %q not found", n)
		}
		kept = append(kept, r.DynamicPrefixes[i])
	}
	r.DynamicPrefixes = kept
	return r, nil
}

// canWatch asks the API server whether this identity may list and watch
// the ConfigMap namespace/name.
func canWatch(ctx context.Context, cfg *rest.Config, configMap string) error {
	ns, name, _ := strings.Cut(configMap, "/")
	c, err := authorizationv1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, verb := range []string{"list", "watch"} {
		r, err := c.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "configmaps", Name: name}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !r.Status.Allowed {
			return fmt.Errorf("this identity may not %s it", verb)
		}
	}
	return nil
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
	l, err := c.Leases(o.config.overrides.Context.Namespace).Get(ctx, o.lease, metav1.GetOptions{})
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
