package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/observe"
)

// waitPublished steps the fake clock by zero until want is the last value
// published (the loop's timers fire on a step).
func waitPublished(t *testing.T, rec *recorder, clk interface{ Step(time.Duration) }, want string) {
	t.Helper()
	waitPublishedWith(t, rec, clk, fmt.Sprintf("%q last", want), func(v string) bool { return v == want })
}

// waitPublishedWith waits until the last digest published satisfies ok.
func waitPublishedWith(t *testing.T, rec *recorder, clk interface{ Step(time.Duration) }, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if got := rec.values(); len(got) > 0 && ok(got[len(got)-1]) {
			return
		}
		select {
		case <-rec.kick:
		case <-time.After(10 * time.Millisecond):
			clk.Step(0)
		case <-deadline:
			t.Fatalf("published %q, want %s", rec.values(), what)
		}
	}
}

func waitAsked(t *testing.T, asked chan time.Time) time.Time {
	t.Helper()
	select {
	case at := <-asked:
		return at
	case <-time.After(10 * time.Second):
		t.Fatal("the listener was never asked to solicit")
		return time.Time{}
	}
}

// fullWindow is the longest a solicitation's window lasts (a router that
// multicasts its answers, asked just after it did).
const fullWindow = observe.MinDelayBetweenRAs + observe.MaxRADelay + observe.DefaultCorroboration

func TestTheAgentSolicitsAndBelievesWhatTheRouterConfirms(t *testing.T) {
	a, rec, clk, asked := startWith(t, Config{StartupGrace: 5 * time.Second, Corroboration: observe.DefaultCorroboration}, "")
	ra := func(p ...netip.Prefix) {
		var out []observe.RAPrefix
		for _, q := range p {
			out = append(out, observe.RAPrefix{Prefix: q, Valid: time.Hour, Preferred: time.Hour, Autonomous: true})
		}
		a.RA("eth0", router, clk.Now(), out)
		sync_(a)
	}
	ra(pA)
	waitAsked(t, asked)
	clk.Step(time.Millisecond)
	ra(pA) // the router's answer
	if got := rec.values(); len(got) != 0 {
		t.Fatalf("published %q before the router had time to contradict", got)
	}
	// Its last multicast RA before the agent listened is unknown, so it
	// may hold its answer (radvd's initial phase): the agent asks again 3 s
	// after the last multicast RA, when any router answers at once.
	clk.Step(observe.MinDelayBetweenRAs)
	waitAsked(t, asked)
	clk.Step(time.Millisecond)
	ra(pA) // its answer
	if got := rec.values(); len(got) != 0 {
		t.Fatalf("published %q before the router had time to contradict", got)
	}
	clk.Step(observe.MaxRADelay + observe.DefaultCorroboration)
	waitPublished(t, rec, clk, "v1;eth0=2001:db8:a::/64 p ra")

	// A spoofer on the router's address offers B alone; the router's answer says A.
	clk.Step(time.Minute)
	ra(pB)
	waitAsked(t, asked)
	clk.Step(time.Millisecond)
	ra(pA)
	waitPublished(t, rec, clk, "v1;eth0 conflict=2001:db8:a::/64 p ra")
	conflicting := make(chan []netip.Addr)
	a.events <- func() { conflicting <- a.conflicts["eth0"] } // read on the loop's goroutine
	if got := <-conflicting; !slices.Equal(got, []netip.Addr{router}) {
		t.Errorf("conflicting = %v", got)
	}
	if got := metricContradictions.With("eth0").Value(); got < 1 {
		t.Errorf("contradictions counted: %d", got)
	}
	// The hold passes with the router alone: the report clears.
	clk.Step(observe.DefaultConflictHold)
	waitPublished(t, rec, clk, "v1;eth0=2001:db8:a::/64 p ra")
	if got, want := rec.values(), []string{"v1;eth0=2001:db8:a::/64 p ra", "v1;eth0 conflict=2001:db8:a::/64 p ra", "v1;eth0=2001:db8:a::/64 p ra"}; !slices.Equal(got, want) {
		t.Errorf("published %q, want %q", got, want)
	}
}

// A first RA heard just before the startup grace runs out is still being
// corroborated when it does: the agent waits for it (up to one more grace)
// instead of publishing a digest without it and then a second one with it.
func TestALateFirstRAIsWaitedForNotPublishedTwice(t *testing.T) {
	a, rec, clk, asked := startWith(t, Config{StartupGrace: 5 * time.Second, Corroboration: observe.DefaultCorroboration}, "")
	a.Address("eth0", slaac(pA), false, clk.Now())
	sync_(a)
	clk.Step(4 * time.Second)
	ra := []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: time.Hour, Autonomous: true}}
	a.RA("eth0", router, clk.Now(), ra)
	sync_(a)
	waitAsked(t, asked)
	clk.Step(time.Millisecond)
	a.RA("eth0", router, clk.Now(), ra) // the router's answer
	sync_(a)
	clk.Step(2 * time.Second) // the grace is over; the window is not
	for range 5 {
		clk.Step(0)
		sync_(a)
	}
	if got := rec.values(); len(got) != 0 {
		t.Fatalf("published %q while the first RA was being corroborated", got)
	}
	// Asked again 3 s after the router's answer (its last multicast RA), it
	// answers at once (the first solicitation's window is radvd's initial
	// phase's: its last multicast RA before the agent listened is unknown).
	clk.Step(time.Second)
	waitAsked(t, asked)
	clk.Step(time.Millisecond)
	a.RA("eth0", router, clk.Now(), ra)
	sync_(a)
	clk.Step(observe.MaxRADelay + observe.DefaultCorroboration)
	waitPublished(t, rec, clk, "v1;eth0=2001:db8:a::/64 p ra")
	if got := rec.values(); len(got) != 1 {
		t.Errorf("published %q, want one publication", got)
	}
}

// An agent restarted on an unchanged network reopens its listener's socket
// at once (the kernel's first listing reports the link up): the change the
// router's answer to the first socket's solicitation made is forgotten, and
// the router answers the second. The reopen is the agent's own doing, no
// second speaker: the digest the Node carries is published unchanged, no
// conflict in it (as Lost, the e2e restart wrote a conflict).
func TestARestartedAgentsReopenWritesNoConflict(t *testing.T) {
	const published = "v1;eth0=2001:db8:a::/64 p ra"
	a, rec, clk, asked := startWith(t, Config{StartupGrace: 5 * time.Second, Corroboration: observe.DefaultCorroboration}, published)
	sync_(a)
	ra := []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: time.Hour, Autonomous: true}}
	// The first socket: the router's multicast RA, the agent's
	// solicitation, its answer.
	a.RA("eth0", router, clk.Now(), ra)
	sync_(a)
	waitAsked(t, asked)
	clk.Step(time.Millisecond)
	a.Heard("eth0", router, clk.Now(), ra, false)
	sync_(a)
	// The second socket, open: it solicits, and the router answers.
	clk.Step(time.Millisecond)
	a.Reopened("eth0", clk.Now())
	clk.Step(time.Millisecond)
	a.Solicited("eth0", clk.Now())
	clk.Step(time.Millisecond)
	a.Heard("eth0", router, clk.Now(), ra, false)
	sync_(a)
	// The reopen counts as the router's multicast RA (it may have sent one
	// unheard), so the agent asks again 3 s on (radvd's initial phase,
	// observe/answer.go): the router answers that one too.
	for range 20 {
		clk.Step(time.Second)
		sync_(a)
		select {
		case <-asked:
			clk.Step(time.Millisecond)
			a.Heard("eth0", router, clk.Now(), ra, false)
			sync_(a)
		default:
		}
	}
	waitPublished(t, rec, clk, published)
	if got := rec.values(); !slices.Equal(got, []string{published}) {
		t.Errorf("published %q, want the unchanged %q alone", got, published)
	}
}
