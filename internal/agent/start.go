package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/agent/dhcp6"
	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// Parts are the agent's side effects, as Start needs them.
type Parts struct {
	Node       string   // this Node's name, for the log
	Interfaces []string // the --interface links, for the log
	Clock      clock.Clock
	Log        *slog.Logger
	// Publisher writes the digest to the Node (publish.Publisher).
	Publisher interface {
		Publisher
		Live(value string, exists bool)
		Run(ctx context.Context)
	}
	// WatchNode follows the digest annotation on the agent's own Node, calling
	// back with its value (exists false when absent); synced closes after the
	// first list.
	WatchNode func(ctx context.Context, live func(value string, exists bool)) (synced <-chan struct{})
	// WatchLinks follows the links to watch (the --interface links and those
	// DynamicPrefixes name; true: global unicast only) and the DHCPv6 clients
	// to run here; synced closes after the first list.
	WatchLinks func(ctx context.Context, links func(map[string]policy.Policy), clients func([]dhcp6.Want)) (synced <-chan struct{})
	// DialDHCPv6 opens a DHCPv6 client's socket on a link (dhcp6.Dial).
	DialDHCPv6 func(link string) (dhcp6.Conn, net.Addr, error)
	// ListenDHCPv6 opens a listener on a link for the packets sent to the
	// servers' group, where a client's node hears the messages sent under
	// its client's DUID (dhcp6.ListenServers; nil: not heard).
	ListenDHCPv6 func(link string) (dhcp6.Conn, error)
	// DefaultLinks are the --interface links, followed alone while the
	// DynamicPrefixes cannot be listed.
	DefaultLinks map[string]policy.Policy
	// NewListener makes the RA listener of one link.
	NewListener NewListener
	// WatchKernel follows the kernel's addresses, links and delegated
	// prefixes until ctx ends.
	WatchKernel func(ctx context.Context, addr func(string, observe.Address, bool, time.Time), link func(string, bool, time.Time),
		delegated func(netip.Prefix, time.Duration, bool, time.Time))
}

// Start runs the start-up sequence, then the agent until ctx ends:
//  1. Read the digest the Node carries now (at most StartupGrace): it seeds the
//     frozen lifetimes, so a restart on an unchanged network writes nothing. A
//     slow API server does not stop observation: past the grace, the agent
//     starts without it.
//  2. Learn which links to follow from the DynamicPrefixes (at most
//     StartupGrace; then the --interface links alone, until the list arrives).
//  3. Follow the kernel, run the DHCPv6 clients the writer asks of this node,
//     publish, observe.
//
// ready reports whether the Node has been read (readiness).
func Start(ctx context.Context, cfg Config, p Parts) (ready func() error, run func()) {
	cfg.Node = p.Node
	var published digest.Node
	var haveLive bool
	live := make(chan struct{})
	nodeSynced := p.WatchNode(ctx, func(v string, exists bool) {
		if !haveLive {
			haveLive = true
			if n, err := digest.Decode(v); exists && err == nil {
				published = n
			}
			close(live)
		}
		p.Publisher.Live(v, exists)
	})
	ready = func() error {
		select {
		case <-live:
			return nil
		default:
			return errors.New("own Node not read yet")
		}
	}
	run = func() {
		select {
		case <-live:
		case <-nodeSynced:
		case <-p.Clock.After(cfg.StartupGrace):
			p.Log.Warn("node not read yet; starting without the published digest", "node", p.Node)
		case <-ctx.Done():
			return
		}
		a := New(cfg, p.Clock, p.Log, p.Publisher, p.NewListener, published)
		clients := &dhcp6.Supervisor{Clock: p.Clock, Log: p.Log, Dial: p.DialDHCPv6, Report: a.Delegated, Conflict: a.DelegationConflict, Offered: a.Offered,
			Listen: p.ListenDHCPv6, Impersonated: a.DelegationImpersonated, Missed: a.ClientMessagesMissed, Dropped: a.DelegationDropped}
		linksSynced := p.WatchLinks(ctx, a.SetLinks, func(w []dhcp6.Want) { clients.Set(ctx, w) })
		select {
		case <-linksSynced:
		case <-p.Clock.After(cfg.StartupGrace):
			p.Log.Warn("DynamicPrefixes not listed yet; watching --interface links only", "links", p.DefaultLinks)
			a.SetLinks(p.DefaultLinks)
		case <-ctx.Done():
			return
		}
		go p.WatchKernel(ctx, a.Address, a.Link, a.Delegated)
		go p.Publisher.Run(ctx)
		p.Log.Info("agent started", "node", p.Node, "interfaces", p.Interfaces)
		a.Run(ctx)
	}
	return ready, run
}
