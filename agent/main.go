// Command agent runs on every node (DaemonSet, host network). It watches Router
// Advertisements and the kernel's addresses on the uplink(s) and publishes what it
// sees as one annotation on its own Node, only when that changes. This file is
// wiring: the work is in internal/agent.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/agent"
	"github.com/renumber/renumber/internal/agent/dhcp6"
	"github.com/renumber/renumber/internal/agent/kernel"
	"github.com/renumber/renumber/internal/agent/kubeconfig"
	"github.com/renumber/renumber/internal/agent/kubehttp"
	"github.com/renumber/renumber/internal/agent/node"
	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/agent/publish"
	"github.com/renumber/renumber/internal/agent/ra"
	"github.com/renumber/renumber/internal/agent/uplink"
	"github.com/renumber/renumber/internal/logs"
	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/requests"
	"github.com/renumber/renumber/internal/version"
)

type links []string

func (l *links) String() string     { return strings.Join(*l, ",") }
func (l *links) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		ifaces      links
		nodeName    = flag.String("node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
		kubeconfig  = flag.String("kubeconfig", "", "kubeconfig file (default: in-cluster)")
		pub         publish.Config
		metricsAddr = flag.String("metrics-addr", "127.0.0.1:9470", "address for /metrics, /healthz and /readyz (the agent runs on the host's network: the default is loopback only); node:PORT listens on the node's IP from $HOST_IP (status.hostIP)")
		audience    = flag.String("metrics-audience", metrics.Audience, "with --metrics-auth=kubernetes: the audience a scraper's token must be minted for (a projected ServiceAccount token with this audience: good for renumber's metrics and nothing else); empty: the API server's own (any token it accepts, also Prometheus's own ServiceAccount token)")
		metricsCA   = flag.String("metrics-ca", "", "with --metrics-auth=kubernetes: a directory holding the install's metrics CA (tls.crt, tls.key: the Secret renumber-metrics-ca), which signs this process's certificate for the name renumber-metrics at start, so that a scraper can verify it; unset or unreadable: a self-signed certificate no scraper can verify")
		metricsAuth = flag.String("metrics-auth", "none", "who may scrape /metrics: none (anyone who reaches the address: keep it on loopback), or kubernetes (HTTPS with a certificate made at start, and only a bearer token the API server says may get /metrics, by TokenReview and SubjectAccessReview)")
		cfg         agent.Config
	)
	flag.DurationVar(&pub.Debounce, "debounce", 100*time.Millisecond, "quiet time before a changed digest is written")
	flag.DurationVar(&pub.MaxDelay, "debounce-max", time.Second, "longest a changed digest waits for quiet: under continuous change the latest is written this long after the first change")
	flag.IntVar(&pub.Burst, "publish-burst", 10, "write budget: digest writes at once")
	flag.Float64Var(&pub.PerMinute, "publish-per-minute", 12, "write budget: sustained digest writes a minute (0: no budget)")
	flag.DurationVar(&cfg.StartupGrace, "startup-grace", 10*time.Second, "how long to wait for the first (corroborated) RA on every link before the first publication (once more while a first RA heard late is being corroborated)")
	flag.BoolVar(&cfg.KeepOmitted, "keep-omitted-prefixes", false, "do not deprecate a prefix its router stops mentioning (for routers that split their prefixes over several RAs)")
	flag.DurationVar(&cfg.Corroboration, "corroboration", observe.DefaultCorroboration, "a change a router's RA makes is believed once the router, solicited, said it again and nothing from its address contradicted it until the latest the router may answer (RFC 4861 6.2.6: 0.5 s for a router seen to unicast its answers, else 3.5 s after its last multicast RA) plus this margin, for a late router and the trip over the link; RAs count by when the kernel received them, and a window ends only once the agent has read everything that arrived in it, however loaded the node (0: believe every RA at once, as a host does)")
	flag.DurationVar(&cfg.ConflictBound, "conflict-bound", 0, "once RAs from a router's address contradict each other, its prefixes stay preferred at most this long unless a word of it is corroborated again (0: until the lifetimes the router stated before run out; a bound on how long a replay can hold a renumbering back, and on how soon an attacker who keeps contradicting the router ends its prefix's preferred state)")
	flag.DurationVar(&cfg.RouterMinDelay, "router-min-delay", observe.MinDelayBetweenRAs, "the routers' MinDelayBetweenRAs, where set above RFC 4861's 3 s (radvd's option): a router that answers solicitations to all nodes may hold an answer that long after its last multicast RA, and the window waits for it (below 3 s: 3 s)")
	flag.DurationVar(&cfg.ConflictHold, "conflict-hold", observe.DefaultConflictHold, "how long a router whose address contradicted itself is reported in conflict after the last contradiction")
	flag.StringVar(&cfg.StateDir, "state-dir", "/var/lib/renumber-agent", "a directory on the node where the agent keeps what it believed of the routers (each prefix's router, state and the preferred and valid ends the router stated), so that a restarted agent holds them as a running one does rather than trusting the kernel's addresses, which take any RA; written when that moves, not on every RA (empty: keep nothing, a restart starts from the published digest)")
	ownStateDir := flag.String("own-state-dir", "", "UID:GID: make --state-dir (created if missing) that user's, mode 0700, and exit (the DaemonSet's init container: the kubelet creates a hostPath directory root's)")
	flag.Var(&ifaces, "interface", "uplink to watch (repeatable); DynamicPrefixes may name more")
	newLog := logs.Flags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println("agent " + version.Get().String())
		return
	}
	if *ownStateDir != "" {
		if err := ownDir(cfg.StateDir, *ownStateDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	log, err := newLog()
	if err == nil && *nodeName == "" {
		err = errors.New("--node-name (or $NODE_NAME) is required")
	}
	if err == nil {
		*metricsAddr, err = listenAddr(*metricsAddr, os.Getenv("HOST_IP"))
	}
	if err == nil && *metricsAuth != "none" && *metricsAuth != "kubernetes" {
		err = fmt.Errorf("--metrics-auth %q: none or kubernetes", *metricsAuth)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ep := metrics.Endpoint{Addr: *metricsAddr, Conns: metrics.NewConns("agent")}
	// Host networking: whoever is on the LAN is one client of the port,
	// however many addresses it answers from (metrics.ClientOf).
	ep.Conns.Routes = metrics.KernelRoutes{}.Route
	var audiences []string
	if *audience != "" {
		audiences = []string{*audience}
	}
	guard := guarding{on: *metricsAuth == "kubernetes", audiences: audiences, caDir: *metricsCA}
	if err := run(ctx, log, *nodeName, *kubeconfig, ifaces, ep, guard, cfg, pub); err != nil {
		log.Error("agent failed", "err", err)
		os.Exit(1)
	}
}

// ownDir makes dir (created if missing) owner's ("UID:GID"), mode 0700.
func ownDir(dir, owner string) error {
	var uid, gid int
	if _, err := fmt.Sscanf(owner, "%d:%d", &uid, &gid); err != nil || uid < 0 || gid < 0 {
		return fmt.Errorf("--own-state-dir %q: want UID:GID", owner)
	}
	if dir == "" {
		return errors.New("--own-state-dir: no --state-dir")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().Perm() == 0o700 && int(st.Uid) == uid && int(st.Gid) == gid {
		return nil // a restart's run: already the agent's
	}
	if err := onlyMemories(dir); err != nil {
		return err
	}
	// With CHOWN alone (no FOWNER), only the owner may chmod: take the
	// directory first (the agent's from an earlier run, say), then give it.
	if err := os.Chown(dir, os.Geteuid(), -1); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return os.Chown(dir, uid, gid)
}

// onlyMemories refuses a directory holding anything but the agents' memory
// files (and their temporary files, "routers-*"): --state-dir mistyped as
// /etc or /var/lib would otherwise give the agent's user - the default user
// of every distroless image - a directory of the host's.
func onlyMemories(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "routers-") {
			return fmt.Errorf("--own-state-dir: %s holds %q, not an agent's memory: refusing to give it to the agent (is --state-dir, chart value agent.stateDir, a directory of the host's?)", dir, e.Name())
		}
	}
	return nil
}

// guarding is how the metrics port is guarded (--metrics-auth=kubernetes).
type guarding struct {
	on        bool
	audiences []string
	caDir     string
}

func run(ctx context.Context, log *slog.Logger, nodeName, kubeconfigPath string, ifaces []string, ep metrics.Endpoint, guard guarding, cfg agent.Config, pub publish.Config) error {
	counter := requests.NewCounter("agent")
	apiCfg, err := kubeconfig.Load(kubeconfigPath)
	if err != nil {
		return err
	}
	apiCfg.UserAgent = "renumber-agent/" + nodeName
	api, err := kubehttp.New(apiCfg, func(rt http.RoundTripper) http.RoundTripper { return requests.Counting(rt, counter, nil) })
	if err != nil {
		return err
	}
	clk := clock.RealClock{}
	ready, start := agent.Start(ctx, cfg, agent.Parts{
		Node: nodeName, Interfaces: ifaces, Clock: clk, Log: log,
		Publisher: publish.New(node.Annotation{Client: api, Node: nodeName}, clk, log, pub),
		WatchNode: func(ctx context.Context, live func(string, bool)) <-chan struct{} {
			return node.Watch(ctx, api, log, nodeName, live)
		},
		WatchLinks: func(ctx context.Context, set func(map[string]policy.Policy), clients func([]dhcp6.Want)) <-chan struct{} {
			return uplink.Watch(ctx, api, log, nodeName, func(f []uplink.Follower) { set(uplink.Links(ifaces, f)) }, clients)
		},
		DefaultLinks: uplink.Links(ifaces, nil),
		DialDHCPv6:   dhcp6.Dial,
		ListenDHCPv6: dhcp6.ListenServers,
		NewListener: func(link string, r agent.Reports) agent.Listener {
			return ra.NewListener(link, r, clk, log)
		},
		WatchKernel: func(ctx context.Context, addr func(string, observe.Address, bool, time.Time), link func(string, bool, time.Time),
			delegated func(netip.Prefix, time.Duration, bool, time.Time)) {
			(&kernel.Watcher{H: kernel.Handlers{Addr: addr, Link: link, Delegated: delegated}, Clock: clk, Log: log}).Run(ctx)
		},
	})
	collectors := slices.Concat(ra.Collectors(), publish.Collectors(), agent.Collectors(), []metrics.Collector{counter, ep.Conns})
	if guard.on {
		// The reviews go through a client of their own: they are questions
		// to the API server, not the agent's requests (counted apart, in
		// renumber_agent_metrics_reviews_total).
		reviews, err := kubehttp.New(apiCfg, nil)
		if err != nil {
			return err
		}
		if ep.TLS, err = metrics.Certificate(log, guard.caDir, "renumber-agent."+nodeName, clk.Now()); err != nil {
			return err
		}
		ep.Guard = metrics.NewGuard(kubehttp.Reviewer{Client: reviews, Audiences: guard.audiences}, clk, "agent")
		collectors = append(collectors, ep.Guard)
	}
	reg := metrics.NewRegistry(collectors...)
	metrics.Start(ctx, log, ep, reg, nil, func(*http.Request) error { return ready() }, nil)
	start()
	return nil
}

// listenAddr resolves --metrics-addr: "node:PORT" is PORT on the node's IP
// (hostIP, from $HOST_IP), so that a scraper can reach the agent without it
// listening on every address of the host; anything else is as given.
func listenAddr(addr, hostIP string) (string, error) {
	port, ok := strings.CutPrefix(addr, "node:")
	if !ok {
		return addr, nil
	}
	ip, err := netip.ParseAddr(hostIP)
	if err != nil {
		return "", fmt.Errorf("--metrics-addr %s needs the node's IP in $HOST_IP (status.hostIP): %q: %w", addr, hostIP, err)
	}
	return net.JoinHostPort(ip.String(), port), nil
}
