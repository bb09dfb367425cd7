package backoff

import (
	"context"
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestNextDoublesToTheMaximum(t *testing.T) {
	b := New(time.Second, 5*time.Second)
	b.rand = func() float64 { return 0.5 } // no spread
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays = %v, want %v", got, want)
		}
	}
	b.Reset()
	if d := b.Next(); d != time.Second {
		t.Errorf("after Reset: %v, want the minimum", d)
	}
}

func TestJitterStaysWithinItsBounds(t *testing.T) {
	for _, r := range []float64{0, 0.25, 0.999999} {
		b := New(10*time.Second, time.Minute)
		b.rand = func() float64 { return r }
		d := b.Next()
		if d < 8*time.Second || d > 12*time.Second {
			t.Errorf("rand %v: delay %v outside 10 s ±20%%", r, d)
		}
	}
	// The real source spreads: 50 delays are not all equal.
	b := New(time.Second, time.Second)
	first, spread := b.Next(), false
	for range 50 {
		spread = spread || b.Next() != first
	}
	if !spread {
		t.Error("no jitter: 50 equal delays")
	}
}

func TestMaxBelowMin(t *testing.T) {
	b := New(time.Second, time.Millisecond)
	b.rand = func() float64 { return 0.5 }
	if d := b.Next(); d != time.Second {
		t.Errorf("delay %v, want 1 s", d)
	}
}

func TestSleep(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	done := make(chan bool)
	go func() { done <- Sleep(context.Background(), clk, time.Minute) }()
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
	clk.Step(time.Minute)
	if !<-done {
		t.Error("Sleep reported a cancellation")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, clk, time.Minute) {
		t.Error("Sleep on an ended context reported the time passed")
	}
}
