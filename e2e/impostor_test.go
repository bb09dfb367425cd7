package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// prefixX is the attacker's.
var prefixX = netip.MustParsePrefix("2001:db8:bad::/64")

// TestARouterImpostorMovesNothing: a host on the LAN takes the trusted
// router's link-local address (nodad) and, for 30 s, advertises only its own
// prefix - every 700 ms, two RAs back to back - while the real radvd keeps
// advertising A every 3-4 s and answering solicitations. Believed, every such
// RA deprecates A on every node at once and the majority flips (15 pool
// writes in 30 s before corroboration). Now the pool, the HA Service and the
// status never hold the attacker's prefix, no pool or Service is written,
// every agent counts contradictions and the DynamicPrefix says RouterConflict.
// Then a real renumbering at the router still lands, and once the router's
// own RAs agree for the conflict hold, the condition clears.
func TestARouterImpostorMovesNothing(t *testing.T) {
	w := newWorld(t, 3)
	ctx := t.Context()
	advertise(t, w, prefixA)
	trusted := trustingHome(t, w, map[string]any{"transition": map[string]any{"mode": "ha"}})
	createPool(t, w)
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1"})
	nodes := []string{"node1", "node2", "node3"}
	for _, n := range nodes {
		startAgent(t, w, n, "--conflict-hold", "15s")
	}
	startWriter(t, w, "writer-a")
	poolIs(t, w, "pool follows A", prefixA.String())
	settleWrites()
	m := mark(t, w)

	impostor, ll, err := w.Net.Impostor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ll != trusted {
		t.Fatalf("the impostor holds %s, the router %s", ll, trusted)
	}
	spoof, err := ndp.MarshalMessage(&ndp.RouterAdvertisement{CurrentHopLimit: 64, Options: []ndp.Option{&ndp.PrefixInformation{
		PrefixLength: 64, Prefix: prefixX.Addr(), OnLink: true, AutonomousAddressConfiguration: true,
		ValidLifetime: 600 * time.Second, PreferredLifetime: 300 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	seen := watchForPrefix(t, w, prefixX)
	sent := 0
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(700 * time.Millisecond) {
		for range 2 {
			if err := impostor.SendRAFrom(trusted, spoof); err != nil {
				t.Fatalf("spoofing: %v", err)
			}
			sent++
		}
	}
	if got := seen(); got != "" {
		t.Errorf("the attacker's prefix was written: %s", got)
	}
	t.Logf("%d spoofed RAs sent from %s", sent, trusted)

	for _, n := range nodes {
		if v := agentMetric(t, w, n, `renumber_agent_router_contradictions_total{link="eth0"}`); v < 1 {
			t.Errorf("%s counted %v contradictions", n, v)
		}
		if v, _ := annotation(t, w, n); strings.Contains(v, prefixX.Addr().String()) {
			t.Errorf("%s reports the attacker's prefix: %s", n, v)
		}
	}
	eventually(t, "RouterConflict is True", func() (bool, string) {
		c := condition(dpStatus(t, w, "home"), render.RouterConflict)
		return c == "True RouterConflict", c
	})
	settleWrites()
	for _, wr := range writesBy(t, w, m, writerUser) {
		switch {
		case wr.Resource == "leases" || wr.Resource == "events":
		case wr.Resource == "dynamicprefixes" && wr.Subresource == "status":
		default:
			t.Errorf("written during the attack: %s", wr)
		}
	}
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != prefixA.String() {
		t.Errorf("current prefix %s after the attack, want A", st.CurrentPrefix)
	}

	// The attacker is gone; the router renumbers: it lands, corroborated.
	advertise(t, w, prefixB, prefixA)
	poolIs(t, w, "B reaches the pool after the attack", prefixB.String(), prefixA.String())
	eventually(t, "RouterConflict clears once the router agrees with itself for the hold", func() (bool, string) {
		c := condition(dpStatus(t, w, "home"), render.RouterConflict)
		return c == "False RoutersAgree", c
	})
	if got := seen(); got != "" {
		t.Errorf("the attacker's prefix was written: %s", got)
	}
}

// watchForPrefix samples the pool, the Service and the status every 100 ms
// until the test ends; the function it returns says where p was seen first
// ("" if nowhere).
func watchForPrefix(t *testing.T, w *world.World, p netip.Prefix) func() string {
	t.Helper()
	needle := strings.TrimSuffix(p.Addr().String(), "::")
	return firstSeen(t, 100*time.Millisecond, func(ctx context.Context) string {
		var where string
		if u, err := w.API.Dynamic.Resource(poolGVR).Get(ctx, "lb", metav1.GetOptions{}); err == nil {
			if b := world.Blocks(u); slices.ContainsFunc(b, func(s string) bool { return strings.Contains(s, needle) }) {
				where = fmt.Sprintf("pool blocks %v", b)
			}
		}
		if svc, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); err == nil {
			for k, v := range svc.Annotations {
				if strings.Contains(v, needle) {
					where = fmt.Sprintf("Service annotation %s=%s", k, v)
				}
			}
		}
		if u, err := w.API.Dynamic.Resource(api.GVR).Get(ctx, "home", metav1.GetOptions{}); err == nil {
			if cur, _, _ := unstructured.NestedString(u.Object, "status", "currentPrefix"); strings.Contains(cur, needle) {
				where = "status.currentPrefix " + cur
			}
		}
		return where
	})
}

// firstSeen runs look every period until the test ends; the function it
// returns gives look's first non-empty answer ("" if none yet). look runs on
// another goroutine: it must not call t.Fatal, and skips a failed read.
func firstSeen(t *testing.T, period time.Duration, look func(ctx context.Context) string) func() string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	found := ""
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if v := look(ctx); v != "" {
				mu.Lock()
				if found == "" {
					found = v
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return found
	}
}

// TestAHostileNodeDecidesNothing: one node's digest is whatever can patch
// that Node. A well-formed digest claiming a new prefix alone adopts
// nothing; one claiming a replaced prefix drains for 2^32-1 s keeps it
// draining only as long as the other nodes report.
func TestAHostileNodeDecidesNothing(t *testing.T) {
	w := homeWorld(t, 3)
	nodes := []string{"node1", "node2", "node3"}
	agents := map[string]interface{ Kill() error }{}
	for _, n := range nodes {
		agents[n] = startAgent(t, w, n).Process
	}
	startWriter(t, w, "writer-a")
	poolIs(t, w, "pool follows A", prefixA.String())
	settleWrites()

	// node3's agent is replaced by whoever holds its identity.
	if err := agents["node3"].Kill(); err != nil {
		t.Fatal(err)
	}
	forge := func(v string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, digest.Annotation, v)
		if _, err := w.API.Client.CoreV1().Nodes().Patch(t.Context(), "node3", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m := mark(t, w)
	forge("v1;eth0=" + prefixX.String() + " p ra")
	settleWrites()
	for _, wr := range writesBy(t, w, m, writerUser) {
		if wr.Resource == "ciliumloadbalancerippools" {
			t.Errorf("one node's digest wrote the pool: %s", wr)
		}
	}
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != prefixA.String() {
		t.Errorf("current %s after one node claimed X alone", st.CurrentPrefix)
	}

	// The router renumbers; node3 claims A drains for 136 years.
	forge("v1;eth0=" + prefixA.String() + " d4294967295 ra," + prefixB.String() + " p ra")
	advertise(t, w, prefixB, prefixA)
	poolIs(t, w, "B current, A draining", prefixB.String(), prefixA.String())
	// While an honest node has not yet heard the renumbering it prefers A (no
	// bound), and the lower median of three is the liar's; once both honest
	// nodes report A deprecated, the drain is theirs.
	limit := time.Now().Add(601 * time.Second)
	historyIs(t, w, "A drains no longer than the router's 600 s give, whatever one node says", func(h []api.HistoryEntry) bool {
		return len(h) == 2 && h[1].ExpiresAt != nil && !h[1].ExpiresAt.After(limit)
	})
}

// TestHostileInputsCostBoundedWrites: what a hostile node or Service owner
// can repeat costs the API at most the event budget, and a Service whose
// annotations are too large to keep is left alone, reported, and followed
// again once they shrink. node2 has no agent: whoever holds its identity
// writes a new garbled digest ten times, each one an event the writer would
// record; with a burst of 3 and 1 a minute, no more than the burst and a
// minute's worth get through, and the rest are counted as dropped.
func TestHostileInputsCostBoundedWrites(t *testing.T) {
	w := haWorld(t, 2)
	ctx := t.Context()
	startAgent(t, w, "node1")
	metrics := freeAddr(t)
	start, since := time.Now(), mark(t, w)
	// node2 runs no agent: the first adoption does not await it (the
	// default minute is for a fresh install's agents to start).
	startWriter(t, w, "writer-a", "--metrics-addr", metrics, "--budget-event-burst", "3", "--budget-events-per-minute", "1", "--node-startup-wait", "0s")
	poolIs(t, w, "pool follows A", prefixA.String())
	settleWrites()

	m := mark(t, w)
	for i := range 10 {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"v1;garbled %d"}}}`, digest.Annotation, i)
		if _, err := w.API.Client.CoreV1().Nodes().Patch(ctx, "node2", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitLog(t, w, "writer-a.log", fmt.Sprintf(`garbled %d\" has no`, i), 1) // each one read, not merged with the next
	}
	eventually(t, "the writer counts dropped events", func() (bool, string) {
		v := writerMetric(metrics, `renumber_writer_events_total{outcome="dropped"}`)
		return v > 0, fmt.Sprint(v)
	})
	settleWrites()
	events := 0
	for _, wr := range writesBy(t, w, since, writerUser) {
		if wr.Resource == "events" {
			events++
		}
	}
	if limit := 3 + int(time.Since(start).Minutes()) + 1; events > limit {
		t.Errorf("the writer recorded %d events in %s, past a budget of %d", events, time.Since(start).Round(time.Second), limit)
	}
	if recorded := writerMetric(metrics, `renumber_writer_events_total{outcome="recorded"}`); recorded != float64(events) {
		t.Errorf("the writer counts %v events recorded, the API saw %d", recorded, events)
	}
	if ws := objectWrites(writesBy(t, w, m, writerUser)); len(ws) > 0 {
		t.Errorf("garbled digests caused object writes %q", ws)
	}

	// The owner of "web" stuffs 20 KiB into a target key: renumber cannot
	// write the Service without keeping it all, so it does not write it.
	big := strings.Repeat("a.example.org,", 20<<10/len("a.example.org,"))
	set := func(v any) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{holdings.AnnotationTarget: v}}})
		if _, err := w.API.Client.CoreV1().Services("default").Patch(ctx, "web", types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	set(big)
	m = mark(t, w)
	advertise(t, w, prefixB, prefixA)
	poolIs(t, w, "pool follows B", prefixB.String(), prefixA.String())
	if ws := serviceWrites(t, w, m); len(ws) > 0 {
		t.Errorf("an oversized Service was written: %q", ws)
	}
	if s, _ := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); s.Annotations[holdings.AnnotationTarget] != big {
		t.Errorf("the user's oversized target was changed (%d bytes)", len(s.Annotations[holdings.AnnotationTarget]))
	}
	eventually(t, "PoolsSynced says why", func() (bool, string) {
		for _, c := range dpStatus(t, w, "home").Conditions {
			if c.Type == "PoolsSynced" {
				return c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "default/web: its annotations renumber reads total"), c.Message
			}
		}
		return false, "no PoolsSynced"
	})

	// Back under the bound, it follows the current prefix again.
	set("lb.example.org")
	b1 := on(t, prefixB, "::ffff:0:1")
	eventually(t, "web follows B again", func() (bool, string) {
		s, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		v := holdings.Split(s.Annotations[holdings.AnnotationTarget])
		return slices.Equal(v, []string{"lb.example.org", b1}), fmt.Sprint(v)
	})
}
