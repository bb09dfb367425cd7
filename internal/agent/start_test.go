package agent

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/agent/dhcp6"
	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
)

type startPublisher struct {
	recorder
	mu   sync.Mutex
	live []string
}

func (p *startPublisher) Live(v string, _ bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = append(p.live, v)
}
func (p *startPublisher) Run(ctx context.Context) { <-ctx.Done() }

// startParts: the Node and the DynamicPrefixes answer (or not) as the test says.
func startParts(clk *clocktesting.FakeClock, pub *startPublisher, node, links chan struct{}, listened chan<- string) Parts {
	return Parts{
		Node: "n1", Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Publisher: pub,
		WatchNode: func(context.Context, func(string, bool)) <-chan struct{} { return node },
		WatchLinks: func(_ context.Context, set func(map[string]policy.Policy), _ func([]dhcp6.Want)) <-chan struct{} {
			synced := make(chan struct{})
			go func() {
				if _, ok := <-links; ok {
					set(map[string]policy.Policy{"eth1": {GlobalOnly: true}})
					close(synced)
				}
			}()
			return synced
		},
		DefaultLinks: map[string]policy.Policy{"eth0": {GlobalOnly: true}},
		NewListener: func(link string, _ Reports) Listener {
			listened <- link
			return idleListener{}
		},
		WatchKernel: func(ctx context.Context, _ func(string, observe.Address, bool, time.Time), _ func(string, bool, time.Time), _ func(netip.Prefix, time.Duration, bool, time.Time)) {
			<-ctx.Done()
		},
	}
}

func waitTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Start never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

// A slow API server does not stop observation: past the grace the agent starts
// without the published digest, and follows the --interface links alone.
func TestStartFallsBackAfterTheGrace(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	pub := &startPublisher{recorder: recorder{kick: make(chan struct{}, 1)}}
	listened := make(chan string, 4)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready, run := Start(ctx, Config{StartupGrace: 5 * time.Second}, startParts(clk, pub, make(chan struct{}), make(chan struct{}), listened))
	go run()
	if ready() == nil {
		t.Error("ready before the Node was read")
	}
	waitTimer(t, clk)
	clk.Step(5 * time.Second) // the Node is not read in time
	waitTimer(t, clk)
	clk.Step(5 * time.Second) // nor are the DynamicPrefixes
	select {
	case link := <-listened:
		if link != "eth0" {
			t.Errorf("listening on %s, want the --interface link eth0", link)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no RA listener started after both graces")
	}
}

// With both answers in time, the links come from the DynamicPrefixes and the
// agent is ready.
func TestStartFollowsTheDynamicPrefixes(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	pub := &startPublisher{recorder: recorder{kick: make(chan struct{}, 1)}}
	listened := make(chan string, 4)
	node, links := make(chan struct{}), make(chan struct{}, 1)
	parts := startParts(clk, pub, node, links, listened)
	parts.WatchNode = func(_ context.Context, live func(string, bool)) <-chan struct{} {
		live("v1;eth1=2001:db8:a::/64 p ra", true)
		close(node)
		return node
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready, run := Start(ctx, Config{StartupGrace: time.Hour}, parts)
	if err := ready(); err != nil {
		t.Errorf("not ready after the Node was read: %v", err)
	}
	go run()
	links <- struct{}{}
	select {
	case link := <-listened:
		if link != "eth1" {
			t.Errorf("listening on %s, want eth1, which the DynamicPrefixes name", link)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no RA listener started")
	}
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if len(pub.live) != 1 || pub.live[0] != "v1;eth1=2001:db8:a::/64 p ra" {
		t.Errorf("publisher told of the live value %q", pub.live)
	}
}
