package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

type fakePatcher struct {
	mu    sync.Mutex
	calls []string
	fail  int // fail this many calls first
	done  chan struct{}
}

func (f *fakePatcher) Patch(_ context.Context, v string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, v)
	defer func() { f.done <- struct{}{} }()
	if f.fail > 0 {
		f.fail--
		return errors.New("API server unavailable")
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
	f := &fakePatcher{fail: fail, done: make(chan struct{}, 100)}
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
