package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

type fakePatcher struct {
	mu    sync.Mutex
	clock *clocktesting.FakeClock
	calls []string
	at    []time.Time // the clock at each call
	fail  int         // fail this many calls first
	done  chan struct{}
	echo  func(v string) // called within a successful patch (the Node watch showing it)
}

func (f *fakePatcher) Patch(_ context.Context, v string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, v)
	f.at = append(f.at, f.clock.Now())
	defer func() { f.done <- struct{}{} }()
	if f.fail > 0 {
		f.fail--
		return errors.New("API server unavailable")
	}
	if f.echo != nil {
		f.echo(v)
	}
	return nil
}

func (f *fakePatcher) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

const debounce = 300 * time.Millisecond

func setup(t *testing.T, fail int) (*Publisher, *fakePatcher, *clocktesting.FakeClock) {
	t.Helper()
	return setupWith(t, fail, Config{Debounce: debounce, MaxDelay: 10 * debounce})
}

func setupWith(t *testing.T, fail int, cfg Config) (*Publisher, *fakePatcher, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	f := &fakePatcher{clock: clk, fail: fail, done: make(chan struct{}, 100)}
	p := New(f, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, f, clk
}

// step advances the fake clock once the publisher is waiting on it.
func step(t *testing.T, clk *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("publisher never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(d)
}

func waitCall(t *testing.T, f *fakePatcher) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(5 * time.Second):
		t.Fatal("no patch happened")
	}
}

func TestNoWriteWhenLiveMatches(t *testing.T) {
	p, f, clk := setup(t, 0)
	p.Live("v1;eth0=", true)
	p.Want("v1;eth0=")
	step(t, clk, debounce)
	// Make a real change afterwards so the test observes the publisher's progress.
	p.Want("v1;eth0=2001:db8::/64 p ra")
	step(t, clk, debounce)
	waitCall(t, f)
	if got := f.Calls(); !slices.Equal(got, []string{"v1;eth0=2001:db8::/64 p ra"}) {
		t.Errorf("patches = %q, want only the real change", got)
	}
}

func TestBurstIsOneWrite(t *testing.T) {
	p, f, clk := setup(t, 0)
	p.Live("", false)
	for _, v := range []string{"v1;eth0=2001:db8:a::/64 p ra", "v1;eth0=2001:db8:a::/64 p ra+addr", "v1;eth0=2001:db8:a::/64 d ra+addr,2001:db8:b::/64 p ra+addr"} {
		p.Want(v)
		step(t, clk, debounce/2)
	}
	step(t, clk, debounce)
	waitCall(t, f)
	if got := f.Calls(); len(got) != 1 || got[0] != "v1;eth0=2001:db8:a::/64 d ra+addr,2001:db8:b::/64 p ra+addr" {
		t.Errorf("patches = %q, want one with the last value", got)
	}
	if p.Writes() != 1 {
		t.Errorf("Writes = %d, want 1", p.Writes())
	}
}

// The latency counted is from the first change the node's value should
// carry to the write of the value that carries it (the debounce included);
// a change undone before it is written counts nothing.
func TestPublishLatencyRunsFromTheFirstChangeToTheWrite(t *testing.T) {
	p, f, clk := setup(t, 0)
	count, sum := metricLatency.Count(), metricLatency.Sum()
	// written lets the clock run in small steps until the next patch, and
	// waits for its latency to be counted; it returns the clock at the patch.
	written := func(n uint64) time.Time {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for metricLatency.Count() < count+n {
			if time.Now().After(deadline) {
				t.Fatal("no latency counted")
			}
			select {
			case <-f.done:
			case <-time.After(5 * time.Millisecond):
				if clk.HasWaiters() {
					clk.Step(debounce / 10)
				}
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.at[len(f.at)-1]
	}
	start := clk.Now()
	p.Live("v1;eth0=", true)
	p.Want("v1;eth0=2001:db8:a::/64 p ra")
	step(t, clk, debounce/2)
	p.Want("v1;eth0=2001:db8:a::/64 p ra+addr")
	at := written(1)
	if n, s := metricLatency.Count()-count, metricLatency.Sum()-sum; n != 1 || math.Abs(s-at.Sub(start).Seconds()) > 1e-9 || s < debounce.Seconds() {
		t.Errorf("observed %d latencies summing %gs, want 1 of %gs (from the first change to the write)", n, s, at.Sub(start).Seconds())
	}

	// A change undone before its write counts nothing: the next one counts
	// from its own start.
	sum = metricLatency.Sum()
	p.Want("v1;eth0=2001:db8:b::/64 p ra")
	step(t, clk, debounce/2)
	p.Want("v1;eth0=2001:db8:a::/64 p ra+addr") // back to what is written
	step(t, clk, debounce/2)
	start = clk.Now()
	p.Want("v1;eth0=2001:db8:c::/64 p ra")
	at = written(2)
	if s := metricLatency.Sum() - sum; math.Abs(s-at.Sub(start).Seconds()) > 1e-9 {
		t.Errorf("after an undone change: latency %gs, want %gs (from the change written, not the undone one)", s, at.Sub(start).Seconds())
	}
	if got := f.Calls(); !slices.Equal(got, []string{"v1;eth0=2001:db8:a::/64 p ra+addr", "v1;eth0=2001:db8:c::/64 p ra"}) {
		t.Errorf("patches %q", got)
	}
}

// The Node watch may show the write before the patch call returns: the
// latency is still counted.
func TestPublishLatencyCountedWhenTheWatchIsFaster(t *testing.T) {
	p, f, clk := setup(t, 0)
	f.echo = func(v string) { p.Live(v, true) }
	count := metricLatency.Count()
	p.Live("v1;eth0=", true)
	p.Want("v1;eth0=2001:db8:a::/64 p ra")
	for deadline := time.Now().Add(5 * time.Second); metricLatency.Count() == count; {
		if time.Now().After(deadline) {
			t.Fatal("a write the watch showed first was not counted")
		}
		if clk.HasWaiters() {
			clk.Step(debounce)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRestoresRemovedAnnotation(t *testing.T) {
	p, f, clk := setup(t, 0)
	p.Live("v1;eth0=", true)
	p.Want("v1;eth0=")
	step(t, clk, debounce)
	p.Live("", false) // someone deleted it
	step(t, clk, debounce)
	waitCall(t, f)
	if got := f.Calls(); !slices.Equal(got, []string{"v1;eth0="}) {
		t.Errorf("patches = %q, want the value restored once", got)
	}
}

func TestRetriesWithBackoff(t *testing.T) {
	p, f, clk := setup(t, 2)
	p.Live("", false)
	p.Want("v1;eth0=")
	step(t, clk, debounce)
	waitCall(t, f)                     // fails
	step(t, clk, 600*time.Millisecond) // 500 ms, +20% jitter at most
	waitCall(t, f)                     // fails
	p.Want("v1;eth1=")                 // the network moved on meanwhile: the retry sends the latest
	step(t, clk, 1200*time.Millisecond)
	waitCall(t, f)
	if got := f.Calls(); !slices.Equal(got, []string{"v1;eth0=", "v1;eth0=", "v1;eth1="}) {
		t.Errorf("patches = %q", got)
	}
	if p.Writes() != 1 {
		t.Errorf("Writes = %d, want 1", p.Writes())
	}
}

// A digest that never stops changing (a flood of fresh prefixes) is still
// published: the latest value, MaxDelay after the first change.
func TestContinuousChangeIsPublishedWithinMaxDelay(t *testing.T) {
	p, f, clk := setupWith(t, 0, Config{Debounce: debounce, MaxDelay: 3 * debounce})
	p.Live("", false)
	var last string
	for i := range 6 { // 6 x debounce/2 = MaxDelay: the quiet period never comes
		last = fmt.Sprintf("v1;eth0=2001:db8:%x::/64 p ra", i)
		p.Want(last)
		step(t, clk, debounce/2)
	}
	waitCall(t, f)
	if got := f.Calls(); !slices.Equal(got, []string{last}) {
		t.Errorf("patches = %q, want the latest value once MaxDelay passed: %q", got, last)
	}
}

// The write budget: Burst writes at once, then one per 60/PerMinute seconds,
// each the latest value; a change that settles costs no extra write.
func TestWriteBudget(t *testing.T) {
	p, f, clk := setupWith(t, 0, Config{Debounce: debounce, MaxDelay: debounce, Burst: 2, PerMinute: 6})
	p.Live("", false)
	value := func(i int) string { return fmt.Sprintf("v1;eth0=2001:db8:%x::/64 p ra", i) }
	for i := range 2 {
		p.Want(value(i))
		step(t, clk, debounce)
		waitCall(t, f)
	}
	p.Want(value(2))
	step(t, clk, debounce) // debounced; now waiting for the budget (10 s)
	p.Want(value(3))       // the network moved on meanwhile
	step(t, clk, 10*time.Second)
	waitCall(t, f)
	if got, want := f.Calls(), []string{value(0), value(1), value(3)}; !slices.Equal(got, want) {
		t.Errorf("patches = %q, want the burst, then the latest after the wait: %q", got, want)
	}
}
