// Command agent runs on every node (DaemonSet, host network). It watches Router
// Advertisements and the kernel's addresses on the uplink(s) and publishes what it
// sees as one annotation on its own Node, only when that changes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/agent"
	"github.com/renumber/renumber/internal/agent/kernel"
	"github.com/renumber/renumber/internal/agent/kubehttp"
	"github.com/renumber/renumber/internal/agent/node"
	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/publish"
	"github.com/renumber/renumber/internal/agent/ra"
	"github.com/renumber/renumber/internal/agent/uplink"
	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/logs"
	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/requests"
)

type links []string

func (l *links) String() string     { return strings.Join(*l, ",") }
func (l *links) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		ifaces       links
		nodeName     = flag.String("node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
		kubeconfig   = flag.String("kubeconfig", "", "kubeconfig file (default: in-cluster)")
		debounce     = flag.Duration("debounce", 100*time.Millisecond, "quiet time before a changed digest is written")
		startupGrace = flag.Duration("startup-grace", 5*time.Second, "how long to wait for the first RA on every link before the first publication")
		metricsAddr  = flag.String("metrics-addr", ":9470", "address for /metrics, /healthz and /readyz")
		keepOmitted  = flag.Bool("keep-omitted-prefixes", false, "do not deprecate a prefix its router stops mentioning (for routers that split their prefixes over several RAs)")
	)
	flag.Var(&ifaces, "interface", "uplink to watch (repeatable); DynamicPrefixes may name more")
	newLog := logs.Flags(flag.CommandLine)
	flag.Parse()
	log, err := newLog()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, *nodeName, *kubeconfig, ifaces, *metricsAddr, agent.Config{StartupGrace: *startupGrace, KeepOmitted: *keepOmitted}, *debounce); err != nil {
		log.Error("agent failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, nodeName, kubeconfig string, ifaces []string, metricsAddr string, cfg agent.Config, debounce time.Duration) error {
	if nodeName == "" {
		return errors.New("--node-name (or $NODE_NAME) is required")
	}
	counter := requests.NewCounter("agent")
	apiCfg, err := kubehttp.Load(kubeconfig)
	if err != nil {
		return err
	}
	apiCfg.UserAgent = "renumber-agent/" + nodeName
	api, err := kubehttp.New(apiCfg, func(rt http.RoundTripper) http.RoundTripper { return requests.Counting(rt, counter, nil) })
	if err != nil {
		return err
	}
	clk := clock.RealClock{}
	reg := metrics.NewRegistry(append(append(append(ra.Collectors(), publish.Collectors()...), agent.Collectors()...), counter)...)

	pub := publish.New(node.Annotation{Client: api, Node: nodeName}, clk, log, debounce)
	var published digest.Node
	var haveLive bool
	live := make(chan struct{})
	synced := node.Watch(ctx, api, log, nodeName, func(v string, exists bool) {
		if !haveLive {
			haveLive = true
			if n, err := digest.Decode(v); exists && err == nil {
				published = n
			}
			close(live)
		}
		pub.Live(v, exists)
	})
	// Wait (briefly) for the Node's current value: it seeds the state so a restart
	// on an unchanged network writes nothing. A slow API server does not stop
	// observation: after the grace period the agent starts without it.
	select {
	case <-live:
	case <-synced:
	case <-time.After(cfg.StartupGrace):
		log.Warn("node not read yet; starting without the published digest", "node", nodeName)
	case <-ctx.Done():
		return nil
	}

	a := agent.New(cfg, clk, log, pub, func(link string, h func(string, netip.Addr, time.Time, []observe.RAPrefix)) agent.Listener {
		return ra.NewListener(link, h, clk, log)
	}, published)
	dpSynced := uplink.Watch(ctx, api, log, func(followers []uplink.Follower) {
		a.SetLinks(uplink.Links(ifaces, followers))
	})
	select {
	case <-dpSynced:
	case <-time.After(cfg.StartupGrace):
		log.Warn("DynamicPrefixes not listed yet; watching --interface links only", "links", ifaces)
		a.SetLinks(uplink.Links(ifaces, nil))
	case <-ctx.Done():
		return nil
	}
	w := &kernel.Watcher{H: kernel.Handlers{Addr: a.Address, Link: a.Link}, Clock: clk, Log: log}
	go w.Run(ctx)
	go pub.Run(ctx)
	go func() {
		ready := func(*http.Request) error {
			select {
			case <-live:
				return nil
			default:
				return errors.New("own Node not read yet")
			}
		}
		if err := metrics.Serve(ctx, log, metricsAddr, reg, nil, ready, nil); err != nil {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("agent started", "node", nodeName, "interfaces", ifaces)
	a.Run(ctx)
	return nil
}
