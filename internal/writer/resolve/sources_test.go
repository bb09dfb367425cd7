package resolve

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/writer/model"
)

// fakeServers answers each server with its entry in answers, counting
// questions.
type fakeServers struct {
	mu      sync.Mutex
	answers map[netip.AddrPort]string // address answered ("": silence)
	asked   int
}

func (f *fakeServers) set(server netip.AddrPort, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[server] = addr
}

func (f *fakeServers) questions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}

func (f *fakeServers) Exchange(ctx context.Context, server netip.AddrPort, name string) (Answer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if f.answers[server] == "" {
		return Answer{}, context.DeadlineExceeded
	}
	return Answer{Addrs: addrs(f.answers[server]), TTL: time.Minute}, nil
}

var (
	s1 = netip.MustParseAddrPort("192.0.2.1:53")
	s2 = netip.MustParseAddrPort("192.0.2.2:53")
)

// sources returns polls over f whose passes are sent on the returned channel.
func sources(f *fakeServers) (*Sources, *clocktesting.FakeClock, chan string) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	passes := make(chan string, 100)
	return &Sources{Exchanger: f, Clock: clk, Changed: func(n string) { passes <- n },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, clk, passes
}

func pass(t *testing.T, passes chan string) {
	t.Helper()
	select {
	case <-passes:
	case <-time.After(10 * time.Second):
		t.Fatal("no pass was queued")
	}
}

func noPass(t *testing.T, passes chan string) {
	t.Helper()
	select {
	case n := <-passes:
		t.Fatalf("a pass over %s was queued, with nothing changed", n)
	default:
	}
}

// waitAsked waits for the poll to have asked n questions and published the round.
func waitAsked(t *testing.T, s *Sources, f *fakeServers, clk *clocktesting.FakeClock, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); f.questions() < n || !clk.HasWaiters(); {
		if time.Now().After(deadline) {
			t.Fatalf("%d questions asked, want %d", f.questions(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAPollCountsOnlyOnceEveryServerWasAsked(t *testing.T) {
	f := &fakeServers{answers: map[netip.AddrPort]string{s1: "2001:db8:1::1", s2: "2001:db8:1::2"}}
	s, clk, passes := sources(f)
	q := &model.DNSSource{Name: "router.example.net.", Servers: []netip.AddrPort{s1, s2}, Length: 48, MinInterval: 10 * time.Second, MaxInterval: 10 * time.Minute}
	if _, ready := s.Reports(t.Context(), "home", q); ready {
		t.Fatal("ready before any server was asked")
	}
	pass(t, passes)
	reports, ready := s.Reports(t.Context(), "home", q)
	if !ready || len(reports) != 2 || reports[0].Node != s1.String() || reports[0].Digest.Links[0].Prefixes[0].Prefix != in1 {
		t.Fatalf("reports %+v, ready %v", reports, ready)
	}

	// The TTL is a minute: no question before it runs out, and an unchanged
	// answer then queues no pass.
	waitAsked(t, s, f, clk, 2)
	clk.Step(59 * time.Second)
	time.Sleep(10 * time.Millisecond)
	if got := f.questions(); got != 2 {
		t.Errorf("%d questions before the TTL ran out, want 2", got)
	}
	clk.Step(time.Second)
	waitAsked(t, s, f, clk, 4)
	noPass(t, passes)

	// One server's answer moves: a pass; the reports say so.
	f.set(s2, "2001:db8:2::1")
	clk.Step(time.Minute)
	pass(t, passes)
	reports, _ = s.Reports(t.Context(), "home", q)
	if p := reports[1].Digest.Links[0].Prefixes; len(p) != 2 || p[0].Prefix != in2 || p[1].Prefix != in1 || !p[1].Deprecated {
		t.Errorf("s2's report %+v", p)
	}

	// A server falls silent: a pass, and its report names no prefix.
	f.set(s1, "")
	waitAsked(t, s, f, clk, 6)
	clk.Step(time.Minute)
	pass(t, passes)
	reports, _ = s.Reports(t.Context(), "home", q)
	if reports[0].Problem != ProblemNoAnswer || len(reports[0].Digest.Links[0].Prefixes) != 0 {
		t.Errorf("s1's report %+v", reports[0])
	}
}

func TestAPollEndsWithItsTermAndStartsAfresh(t *testing.T) {
	f := &fakeServers{answers: map[netip.AddrPort]string{s1: "2001:db8:1::1"}}
	s, clk, passes := sources(f)
	q := &model.DNSSource{Name: "router.example.net.", Servers: []netip.AddrPort{s1}, Length: 48, MinInterval: 10 * time.Second, MaxInterval: 10 * time.Minute}
	term, end := context.WithCancel(t.Context())
	s.Reports(term, "home", q)
	pass(t, passes)
	waitAsked(t, s, f, clk, 1)
	end()
	clk.Step(time.Hour)
	time.Sleep(10 * time.Millisecond)
	if got := f.questions(); got != 1 {
		t.Errorf("%d questions after the term ended, want 1", got)
	}
	if _, ready := s.Reports(t.Context(), "home", q); ready {
		t.Error("a new term counts the last term's answers")
	}
	pass(t, passes)

	// A changed spec starts afresh too; Stop ends it.
	q2 := *q
	q2.Length = 56
	if _, ready := s.Reports(t.Context(), "home", &q2); ready {
		t.Error("a changed query counts the old one's answers")
	}
	pass(t, passes)
	s.Stop("home")
	asked := f.questions()
	clk.Step(time.Hour)
	time.Sleep(10 * time.Millisecond)
	if got := f.questions(); got != asked {
		t.Errorf("questions after Stop: %d, want %d", got, asked)
	}
}

func TestPrimeAsksOnceAndThePollGoesOnFromThere(t *testing.T) {
	f := &fakeServers{answers: map[netip.AddrPort]string{s1: "2001:db8:1::1"}}
	s, clk, _ := sources(f)
	q := &model.DNSSource{Name: "router.example.net.", Servers: []netip.AddrPort{s1}, Length: 48, MinInterval: 10 * time.Second, MaxInterval: 10 * time.Minute}
	if r := s.Prime(t.Context(), "home", q); len(r) != 1 || r[0].Digest.Links[0].Prefixes[0].Prefix != in1 || f.questions() != 1 {
		t.Fatalf("primed reports %+v after %d questions", r, f.questions())
	}
	if r := s.Prime(t.Context(), "home", q); len(r) != 1 || f.questions() != 1 {
		t.Errorf("primed again: %+v after %d questions, want the running poll's without asking", r, f.questions())
	}
	if _, ready := s.Reports(t.Context(), "home", q); !ready {
		t.Error("a primed poll is not ready")
	}
	waitAsked(t, s, f, clk, 1)
	clk.Step(time.Minute)
	waitAsked(t, s, f, clk, 2)
}
