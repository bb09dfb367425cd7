package e2e

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := world.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// writerMetric reads one sample from the writer's metrics at addr (-1 when
// it cannot be read or is absent).
func writerMetric(addr, sample string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if v, ok := world.MetricSample(body, sample); ok {
		return v
	}
	return -1
}

func condition(st api.Status, typ string) string {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return string(c.Status) + " " + c.Reason
		}
	}
	return ""
}

// TestQuietRouter: the router stops for longer than the valid lifetime it
// advertised, so every node's digest empties. The prefix stays current and in
// the pools, and status says so: PrefixAcquired False and Degraded True
// (PrefixNotReported), one event, the metric the alert reads. When the router
// comes back, the conditions clear; neither transition writes a pool.
func TestQuietRouter(t *testing.T) {
	w := newWorld(t, 2)
	ctx := t.Context()
	// Short lifetimes from the first RA on: the kernel never shortens an
	// address's valid lifetime below two hours on a later RA's word.
	short := world.Advert{Prefix: prefixA, Valid: 20 * time.Second, Preferred: 10 * time.Second}
	if err := w.Net.Router.Advertise(ctx, short); err != nil {
		t.Fatal(err)
	}
	minimalDP(t, w, "home")
	createPool(t, w)
	for _, n := range []string{"node1", "node2"} {
		startAgent(t, w, n)
	}
	metrics := freeAddr(t)
	startWriter(t, w, "writer-a", "--metrics-addr", metrics)
	poolIs(t, w, "pool follows A", prefixA.String())
	eventually(t, "PrefixAcquired", func() (bool, string) {
		c := condition(dpStatus(t, w, "home"), "PrefixAcquired")
		return c == "True Acquired", c
	})
	settleWrites()
	unreported := `renumber_writer_dynamicprefix_unreported{name="home"}`
	if v := writerMetric(metrics, unreported); v != 0 {
		t.Errorf("%s = %v before the router went quiet", unreported, v)
	}
	degraded := `renumber_writer_dynamicprefix_condition{name="home",condition="Degraded"}`
	for m, want := range map[string]float64{degraded: 0, `renumber_writer_dynamicprefix_condition{name="home",condition="PoolsSynced"}`: 1} {
		if v := writerMetric(metrics, m); v != want {
			t.Errorf("%s = %v, want %v", m, v, want)
		}
	}

	m := mark(t, w)
	w.Net.Router.Stop()
	eventually(t, "status reports the quiet router", func() (bool, string) {
		st := dpStatus(t, w, "home")
		a, d := condition(st, "PrefixAcquired"), condition(st, "Degraded")
		return a == "False PrefixNotReported" && d == "True PrefixNotReported" && st.CurrentPrefix == prefixA.String(),
			a + " / " + d + " / " + st.CurrentPrefix
	})
	waitEvent(t, w, "PrefixNotReported", "home")
	eventually(t, "the metrics", func() (bool, string) {
		v, d := writerMetric(metrics, unreported), writerMetric(metrics, degraded)
		return v == 1 && d == 1, fmt.Sprint(v, d)
	})
	settleWrites()
	// Status writes only, no pool write: no longer reported (and, when a pass
	// saw it in between, A deprecated as its preferred lifetime ran out).
	status := "patch dynamicprefixes/status home 200"
	got := objectWrites(writesBy(t, w, m, writerUser))
	if len(got) == 0 || len(got) > 2 || slices.ContainsFunc(got, func(s string) bool { return s != status }) {
		t.Errorf("the router going quiet wrote %q, want one or two %q (the pool keeps A)", got, status)
	}
	if b := blocks(t, w, "lb"); !slices.Contains(b, prefixA.String()) {
		t.Errorf("pool %v lost A", b)
	}

	m = mark(t, w)
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixA, Valid: 600 * time.Second, Preferred: 300 * time.Second}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the conditions clear", func() (bool, string) {
		st := dpStatus(t, w, "home")
		a, d := condition(st, "PrefixAcquired"), condition(st, "Degraded")
		return a == "True Acquired" && d == "False Healthy", a + " / " + d
	})
	settleWrites()
	if got, want := objectWrites(writesBy(t, w, m, writerUser)), []string{status}; !slices.Equal(got, want) {
		t.Errorf("the router coming back wrote %q, want %q", got, want)
	}
	if v := writerMetric(metrics, unreported); v != 0 {
		t.Errorf("%s = %v after the router came back", unreported, v)
	}
	if n := countLog(w, "writer-a.log", "any more (has the router gone quiet?)"); n != 1 {
		t.Errorf("%d log lines for the quiet router, want 1", n)
	}
}
