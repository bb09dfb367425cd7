package agent

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

type recorder struct {
	mu   sync.Mutex
	got  []string
	kick chan struct{}
}

func (r *recorder) Want(v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 || r.got[len(r.got)-1] != v {
		r.got = append(r.got, v)
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

func (r *recorder) values() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// valuesFrom is what was published from the first want on: a test whose
// agent starts with no RA may publish the empty link first, when its loop
// evaluates before the test's first RA arrives (seen under load).
func (r *recorder) valuesFrom(want string) []string {
	got := r.values()
	if i := slices.Index(got, want); i >= 0 {
		return got[i:]
	}
	return got
}

type idleListener struct{}

func (idleListener) Run(ctx context.Context) { <-ctx.Done() }
func (idleListener) Restart()                {}
func (idleListener) Solicit()                {}
func (idleListener) Sync()                   {}

// solicitingListener records each solicitation asked for, and reports it
// sent at once, at the fake clock's time. The tests hand the agent RAs
// themselves, as they arrive: a Sync finds everything read.
type solicitingListener struct {
	idleListener
	link  string
	clk   *clocktesting.FakeClock
	r     Reports
	asked chan time.Time
}

func (l solicitingListener) Solicit() {
	now := l.clk.Now()
	// As ra's reader does: the socket read up to the send first, so the
	// window reckons from what was heard.
	l.r.Read(l.link, now)
	l.r.Solicited(l.link, now)
	l.asked <- now
}

func (l solicitingListener) Sync() { l.r.Read(l.link, l.clk.Now()) }

var (
	t0     = time.Unix(1000, 0)
	router = netip.MustParseAddr("fe80::1")
	pA     = netip.MustParsePrefix("2001:db8:a::/64")
	pB     = netip.MustParsePrefix("2001:db8:b::/64")
)

func start(t *testing.T, published string) (*Agent, *recorder, *clocktesting.FakeClock) {
	t.Helper()
	a, rec, clk, _ := startWith(t, Config{StartupGrace: 5 * time.Second}, published)
	return a, rec, clk
}

// startWith starts an agent with cfg on eth0; the channel has the times its
// listener was asked to solicit.
func startWith(t *testing.T, cfg Config, published string) (*Agent, *recorder, *clocktesting.FakeClock, chan time.Time) {
	t.Helper()
	return startAt(t, cfg, published, t0)
}

// startAt is startWith with the clock starting at at.
func startAt(t *testing.T, cfg Config, published string, at time.Time) (*Agent, *recorder, *clocktesting.FakeClock, chan time.Time) {
	t.Helper()
	var pub digest.Node
	if published != "" {
		var err error
		if pub, err = digest.Decode(published); err != nil {
			t.Fatal(err)
		}
	}
	clk := clocktesting.NewFakeClock(at)
	rec := &recorder{kick: make(chan struct{}, 16)}
	asked := make(chan time.Time, 16)
	a := New(cfg, clk,
		slog.New(slog.NewTextHandler(io.Discard, nil)), rec,
		func(link string, r Reports) Listener {
			return solicitingListener{link: link, clk: clk, r: r, asked: asked}
		}, pub)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	return a, rec, clk, asked
}

// sync_ waits until the loop has handled every event sent so far and
// evaluated after them. (Two round trips were not enough: the loop drains a
// burst of events before it evaluates, and the second could land in the
// same burst.)
func sync_(a *Agent) {
	count := func() uint64 {
		ch := make(chan uint64)
		a.events <- func() { ch <- a.evaluations }
		return <-ch
	}
	for before := count(); count() == before; {
	}
}

func slaac(p netip.Prefix) observe.Address {
	b := p.Addr().As16()
	b[15] = 1
	return observe.Address{Addr: netip.PrefixFrom(netip.AddrFrom16(b), 64), Valid: time.Hour, Preferred: time.Hour}
}

func TestStartupWaitsForFirstRA(t *testing.T) {
	a, rec, _ := start(t, "")
	a.Address("eth0", slaac(pA), false, t0)
	sync_(a)
	if got := rec.values(); len(got) != 0 {
		t.Fatalf("published %q before the first RA", got)
	}
	a.RA("eth0", router, t0, []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: time.Hour, Autonomous: true}})
	sync_(a)
	if got, want := rec.values(), []string{"v1;eth0=2001:db8:a::/64 p ra"}; !slices.Equal(got, want) {
		t.Errorf("published %q, want %q", got, want)
	}
}

func TestStartupGraceEndsWithoutRA(t *testing.T) {
	a, rec, clk := start(t, "")
	a.Address("eth0", slaac(pA), false, t0)
	sync_(a)
	clk.Step(5 * time.Second)
	// The loop re-arms its timer after each batch of events: a step that lands
	// before it did leaves a timer due now, which a fake clock fires on its
	// next step. Steps of zero fire it without moving time on.
	deadline := time.After(10 * time.Second)
	for published := false; !published; {
		select {
		case <-rec.kick:
			published = true
		case <-time.After(10 * time.Millisecond):
			clk.Step(0)
		case <-deadline:
			t.Fatal("nothing published after the startup grace")
		}
	}
	if got, want := rec.values(), []string{"v1;eth0=2001:db8:a::/64 p addr"}; !slices.Equal(got, want) {
		t.Errorf("published %q, want %q", got, want)
	}
}

func TestPrefixChangeIsOnePublication(t *testing.T) {
	a, rec, clk := start(t, "")
	a.RA("eth0", router, t0, []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: time.Hour, Autonomous: true}})
	a.Address("eth0", slaac(pA), false, t0)
	sync_(a)
	// The router renumbers: B arrives, A deprecated; the kernel deprecates A's
	// address at once but forms B's only after DAD.
	clk.Step(10 * time.Second)
	at := clk.Now()
	a.RA("eth0", router, at, []observe.RAPrefix{
		{Prefix: pB, Valid: time.Hour, Preferred: time.Hour, Autonomous: true},
		{Prefix: pA, Valid: 600 * time.Second, Preferred: 0, Autonomous: true}})
	dep := slaac(pA)
	dep.Preferred, dep.Valid, dep.Deprecated = 0, 600*time.Second, true
	a.Address("eth0", dep, false, at)
	sync_(a)
	clk.Step(1500 * time.Millisecond)
	a.Address("eth0", slaac(pB), false, clk.Now())
	sync_(a)
	want := []string{
		"v1;eth0=2001:db8:a::/64 p ra",
		"v1;eth0=2001:db8:a::/64 d600 ra,2001:db8:b::/64 p ra",
	}
	if got := rec.values(); !slices.Equal(got, want) {
		t.Errorf("published:\n got %q\nwant %q", got, want)
	}
}

func TestRestartSeedsFrozenLifetime(t *testing.T) {
	published := "v1;eth0=2001:db8:a::/64 d900 ra,2001:db8:b::/64 p ra"
	a, rec, _ := start(t, published)
	sync_(a) // the loop runs before the first RA, as on a real restart
	// After the restart the router reports less time left for A.
	a.RA("eth0", router, t0, []observe.RAPrefix{
		{Prefix: pB, Valid: time.Hour, Preferred: time.Hour},
		{Prefix: pA, Valid: 300 * time.Second, Preferred: 0}})
	sync_(a)
	if got := rec.values(); !slices.Equal(got, []string{published}) {
		t.Errorf("published %q, want the unchanged %q", got, published)
	}
}

// A restart on a node whose digest carried a delegation waits (within the
// grace) for the DHCPv6 client to confirm it, rather than publishing the
// digest without it and then with it again: a restart on an unchanged
// network writes nothing.
func TestRestartWaitsForTheDelegationBack(t *testing.T) {
	published := "v1;eth0=2001:db8:a::/64 p ra,2001:db8:a00::/56 p pd"
	a, rec, _ := start(t, published)
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true, Delegated: true}})
	a.RA("eth0", router, t0, []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: time.Hour}})
	sync_(a)
	if got := rec.values(); len(got) != 0 {
		t.Fatalf("published %q before the delegation was back", got)
	}
	a.Delegated(netip.MustParsePrefix("2001:db8:a00::/56"), time.Minute, false, t0)
	sync_(a)
	if got := rec.values(); !slices.Equal(got, []string{published}) {
		t.Errorf("published %q, want the unchanged %q", got, published)
	}
}
