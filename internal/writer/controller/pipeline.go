// A Pipeline assembles the writer from its parts over one set of
// clients: the caches, the ballot of node digests and the controller. The
// writer runs it as leader or as a shadow (--dry-run); kubectl renumber
// status runs it as a shadow once, to tell what the writer would write now.

package controller

import (
	"log/slog"
	"slices"
	"time"

	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/writer/apply"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/caches"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/resolve"
)

// Options of a pipeline, from the writer's flags.
type Options struct {
	NodeGrace time.Duration
	// NodeStartupWait is how long the ballot awaits a Node's first digest.
	NodeStartupWait time.Duration
	// L2Nudge is --l2-nudge (auto, always, never); with auto the Cilium
	// DaemonSet in CiliumNamespace is watched.
	L2Nudge, CiliumNamespace string
	// CiliumWait is how long to wait for the Cilium DaemonSet before going on
	// without it (0: the caches' default).
	CiliumWait time.Duration
	// KubeVIP is the kube-vip ConfigMap followed ("" none).
	KubeVIP   string
	Reconcile Config
	// DryRun makes it a shadow: Reconcile.Plan records the writes, events are
	// only logged, and a leader's status writes are followed.
	DryRun bool
}

// Pipeline is the writer without its election.
type Pipeline struct {
	Caches     *caches.Caches
	Ballot     *Ballot
	Controller *Controller
	// Resolvers poll the names DynamicPrefixes follow (acquisition.dns).
	Resolvers *resolve.Sources
	// Plan is the shadow's plan (nil unless DryRun).
	Plan *permit.Plan
}

// DNSTimeout bounds one question to a DNS server (a round asks a silent
// server twice).
const DNSTimeout = 2 * time.Second

// NewPipeline assembles a pipeline reading and writing with cl; rec records events
// (its client is dropped for a shadow).
func NewPipeline(o Options, cl Clients, rec *apply.EventRecorder, clk clock.WithTicker, log *slog.Logger) *Pipeline {
	discover := func() (backends.Discovered, error) { // looked up again when a CRD of these groups changes
		return backends.Discover(cl.Discovery, o.KubeVIP)
	}
	p := &Pipeline{}
	if o.DryRun {
		rec.Client = nil
		p.Plan = permit.NewPlan(log)
		o.Reconcile.Plan = p.Plan
	}
	cfg := caches.Config{NodeGrace: o.NodeGrace, BackendGroups: backends.Groups(),
		TargetKeys: o.Reconcile.TargetKeys, StatusChanges: o.DryRun, CiliumWait: o.CiliumWait}
	if o.L2Nudge == "auto" {
		cfg.CiliumNamespace = o.CiliumNamespace
	}
	p.Caches = caches.New(cfg, cl.Dynamic, cl.Metadata, typed{cl.Core, cl.Apps}, discover, clk, log)
	o.Reconcile.L2Nudge = (&backends.L2Nudge{Mode: o.L2Nudge, Images: p.Caches.CiliumImages, Log: log}).Needed
	p.Ballot = NewBallot(o.NodeGrace, o.NodeStartupWait, p.Caches.Nodes, log, rec)
	p.Resolvers = &resolve.Sources{Exchanger: resolve.Wire{Timeout: DNSTimeout}, Clock: clk, Log: log, ResolvConf: resolve.ResolvConf}
	o.Reconcile.Resolvers = p.Resolvers
	p.Controller = NewController(o.Reconcile, p.Caches, p.Ballot, cl.Dynamic, cl.Metadata, clk, log, rec)
	p.Resolvers.Changed = p.Controller.DynamicPrefixChanged
	return p
}

// Collectors are the pipeline's metrics: the controller's, the ballot's, the
// staleness checks', and the shadow's plan.
func (p *Pipeline) Collectors() []metrics.Collector {
	cs := slices.Concat(Collectors(), caches.StalenessCollectors(), p.Ballot.Collectors(), resolve.Collectors(), []metrics.Collector{p.Controller.Collector()})
	if p.Plan != nil {
		cs = append(cs, p.Plan.Collector())
	}
	return cs
}

// typed are the typed clients the caches read with.
type typed struct {
	corev1client.CoreV1Interface
	appsv1client.AppsV1Interface
}
