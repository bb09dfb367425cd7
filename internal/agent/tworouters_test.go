package agent

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/agent/observe"
)

// simRouter is a conforming router on eth0 for the agent-level restart
// tests: it multicasts its RA every period from phase on, and answers each
// solicitation - by unicast after delay (radvd's default), or multicast
// no sooner than MinDelayBetweenRAs after its last multicast RA, plus
// delay (AdvRASolicitedUnicast off).
type simRouter struct {
	addr      netip.Addr
	prefixes  []observe.RAPrefix
	period    time.Duration
	phase     time.Duration
	multicast bool          // answers to all nodes
	delay     time.Duration // its answer's delay (0-0.5 s)

	next, lastMcast time.Time
	answers         []time.Time
}

// due returns the RAs the router sends in (from, to], in order, as
// (time, multicast) pairs, and moves its schedule on.
func (r *simRouter) due(from, to time.Time) []simRA {
	var out []simRA
	for {
		at, mcast, answer := r.next, true, -1
		for i, t := range r.answers {
			if t.Before(at) {
				at, mcast, answer = t, r.multicast, i
			}
		}
		if at.After(to) {
			return out
		}
		if answer >= 0 {
			r.answers = append(r.answers[:answer], r.answers[answer+1:]...)
		} else {
			r.next = r.next.Add(r.period)
		}
		if at.After(from) {
			out = append(out, simRA{r, at, mcast})
		}
		if mcast {
			r.lastMcast = at
		}
	}
}

// solicited schedules the router's answer to a solicitation sent at at.
func (r *simRouter) solicited(at time.Time) {
	t := at.Add(max(r.delay, time.Millisecond))
	if r.multicast && t.Before(r.lastMcast.Add(observe.MinDelayBetweenRAs+r.delay)) {
		t = r.lastMcast.Add(observe.MinDelayBetweenRAs + r.delay)
	}
	r.answers = append(r.answers, t)
}

type simRA struct {
	r         *simRouter
	at        time.Time
	multicast bool
}

// simLink runs routers against an agent from the clock's now to until, in
// steps of tick, answering the solicitations the agent sends.
func simLink(t *testing.T, a *Agent, clk *clocktesting.FakeClock, asked chan time.Time, routers []*simRouter, until time.Time) {
	t.Helper()
	const tick = 10 * time.Millisecond
	for now := clk.Now(); now.Before(until); {
		next := now.Add(tick)
		var ras []simRA
		for _, r := range routers {
			ras = append(ras, r.due(now, next)...)
		}
		for _, ra := range ras {
			a.Heard("eth0", ra.r.addr, ra.at, ra.r.prefixes, ra.multicast)
		}
		clk.SetTime(next)
		now = next
		sync_(a)
		for more := true; more; {
			select {
			case at := <-asked:
				for _, r := range routers {
					r.solicited(at)
				}
			default:
				more = false
			}
		}
	}
}

// writes counts the Node writes a publisher holding published makes for
// the values the agent wanted (the publisher writes only what differs).
func writes(published string, values []string) []string {
	var out []string
	for _, v := range values {
		if v != published {
			out = append(out, v)
			published = v
		}
	}
	return out
}

// A restart into an unchanged world publishes nothing, with two routers on
// the link too. routerA states A; routerB states B (and, in the second
// case, A as well); both are believed and published before the restart.
// The restarted agent solicits at start (ra.Listener.Run), both routers
// answer it, and go on with their periodic RAs: nothing changed, so the
// Node must not be written - with the memory file, and with the digest's
// seed alone (--state-dir=, or a lost file).
func TestARestartWithTwoRoutersPublishesNothing(t *testing.T) {
	routerA, routerB := router, netip.MustParseAddr("fe80::2")
	lifetimes := func(ps ...netip.Prefix) []observe.RAPrefix {
		var out []observe.RAPrefix
		for _, p := range ps {
			out = append(out, observe.RAPrefix{Prefix: p, Valid: 24 * time.Hour, Preferred: 4 * time.Hour, Autonomous: true})
		}
		return out
	}
	for _, c := range []struct {
		name             string
		bStates          []netip.Prefix
		memory           bool
		aMcast, bMcast   bool
		aPeriod, bPeriod time.Duration
		aDelay, bDelay   time.Duration
	}{
		{name: "B states its own prefix, memory", bStates: []netip.Prefix{pB}, memory: true, aPeriod: 10 * time.Second, bPeriod: 7 * time.Second},
		{name: "B states its own prefix, seed alone", bStates: []netip.Prefix{pB}, aPeriod: 10 * time.Second, bPeriod: 7 * time.Second},
		{name: "B restates A, memory", bStates: []netip.Prefix{pB, pA}, memory: true, aPeriod: 10 * time.Second, bPeriod: 7 * time.Second},
		{name: "B restates A, seed alone", bStates: []netip.Prefix{pB, pA}, aPeriod: 10 * time.Second, bPeriod: 7 * time.Second},
		{name: "B multicasts its answers, memory", bStates: []netip.Prefix{pB}, memory: true, bMcast: true, bDelay: 300 * time.Millisecond, aPeriod: 10 * time.Second, bPeriod: 7 * time.Second},
		{name: "B multicasts its answers, seed alone", bStates: []netip.Prefix{pB}, bMcast: true, bDelay: 300 * time.Millisecond, aPeriod: 10 * time.Second, bPeriod: 7 * time.Second},
		{name: "both multicast, slow periods, seed alone", bStates: []netip.Prefix{pB}, aMcast: true, bMcast: true, aDelay: 100 * time.Millisecond, bDelay: 450 * time.Millisecond, aPeriod: 200 * time.Second, bPeriod: 300 * time.Second},
		{name: "both multicast, slow periods, memory", bStates: []netip.Prefix{pB}, memory: true, aMcast: true, bMcast: true, aDelay: 100 * time.Millisecond, bDelay: 450 * time.Millisecond, aPeriod: 200 * time.Second, bPeriod: 300 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{StartupGrace: 10 * time.Second, Corroboration: observe.DefaultCorroboration}
			if c.memory {
				cfg.StateDir = t.TempDir()
			}
			ra := &simRouter{addr: routerA, prefixes: lifetimes(pA), period: c.aPeriod, multicast: c.aMcast, delay: c.aDelay, next: t0.Add(time.Second)}
			rb := &simRouter{addr: routerB, prefixes: lifetimes(c.bStates...), period: c.bPeriod, multicast: c.bMcast, delay: c.bDelay, next: t0.Add(3 * time.Second)}
			routers := []*simRouter{ra, rb}

			a, rec, clk, asked := startWith(t, cfg, "")
			a.Address("eth0", slaac(pA), false, t0)
			a.Address("eth0", slaac(pB), false, t0)
			a.Solicited("eth0", t0)
			for _, r := range routers {
				r.solicited(t0)
			}
			simLink(t, a, clk, asked, routers, t0.Add(10*time.Minute))
			before := rec.values()
			if len(before) == 0 {
				t.Fatal("nothing published before the restart")
			}
			published := before[len(before)-1]
			if want := "v1;eth0=2001:db8:a::/64 p ra,2001:db8:b::/64 p ra"; published != want {
				t.Fatalf("before the restart: published %q, want %q", before, want)
			}

			if c.memory {
				if _, err := loadMemory(cfg.StateDir, "", clk.Now()); err != nil {
					t.Fatalf("no memory kept before the restart: %v", err)
				}
			}
			restart := clk.Now().Add(2 * time.Second)
			a2, rec2, clk2, asked2 := startAt(t, cfg, published, restart)
			// The kernel's first listing, and the listener's solicitation
			// as its socket opens.
			a2.Address("eth0", slaac(pA), false, restart)
			a2.Address("eth0", slaac(pB), false, restart)
			for _, r := range routers {
				r.due(clk.Now(), restart) // what they said while the agent was down went unheard
			}
			start := restart.Add(5 * time.Millisecond)
			clk2.SetTime(start)
			a2.Solicited("eth0", start)
			for _, r := range routers {
				r.solicited(start)
			}
			simLink(t, a2, clk2, asked2, routers, restart.Add(10*time.Minute))
			if diff := cmp.Diff([]string(nil), writes(published, rec2.values())); diff != "" {
				t.Errorf("Node writes after a restart into an unchanged world (-want +got):\n%s", diff)
			}
		})
	}
}

// The hold is bounded by the startup grace: with the second router gone
// while the agent was down (and no memory), the first digest is published
// once the grace ends - B deprecated, its address alone - and once only.
func TestARestartHoldsASecondRoutersPrefixNoLongerThanTheGrace(t *testing.T) {
	const grace = 10 * time.Second
	cfg := Config{StartupGrace: grace, Corroboration: observe.DefaultCorroboration}
	const published = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:b::/64 p ra"
	a, rec, clk, asked := startWith(t, cfg, published)
	a.Address("eth0", slaac(pA), false, t0)
	a.Address("eth0", slaac(pB), false, t0)
	a.Solicited("eth0", t0)
	ra := &simRouter{addr: router, prefixes: []observe.RAPrefix{{Prefix: pA, Valid: 24 * time.Hour, Preferred: 4 * time.Hour, Autonomous: true}},
		period: 10 * time.Second, next: t0.Add(time.Second)}
	ra.solicited(t0)
	routers := []*simRouter{ra}
	simLink(t, a, clk, asked, routers, t0.Add(grace-10*time.Millisecond))
	if got := writes(published, rec.values()); len(got) != 0 {
		t.Fatalf("published %q before the grace ended, B's router not heard yet", got)
	}
	simLink(t, a, clk, asked, routers, t0.Add(time.Minute))
	got := writes(published, rec.values())
	if len(got) != 1 || !strings.HasPrefix(got[0], "v1;eth0=2001:db8:a::/64 p ra,2001:db8:b::/64 d") || !strings.HasSuffix(got[0], " addr") {
		t.Errorf("published %q, want one write at the grace: A preferred, B deprecated on its address alone", got)
	}
}
