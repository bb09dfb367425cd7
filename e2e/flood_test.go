package e2e

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/digest"
)

// TestAFloodOfFreshPrefixes: a host on the link sends an RA with a fresh
// prefix every 50 ms for 20 s. A real renumbering made 8 s into the flood
// still reaches the pool while the flood goes on (the debounce's maximum
// delay and the eviction order keep it from being starved or crowded out);
// each agent's writes stay within its write budget and its log stays short.
func TestAFloodOfFreshPrefixes(t *testing.T) {
	w, nodes := runningHome(t)
	ctx := t.Context()
	flooder, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	logSize := map[string]int64{}
	for _, n := range nodes {
		if st, err := os.Stat(filepath.Join(w.Dir, "agent-"+n+".log")); err == nil {
			logSize[n] = st.Size()
		}
	}
	m := mark(t, w)

	const every, lasting = 50 * time.Millisecond, 20 * time.Second
	var sent atomic.Int64
	var flooding atomic.Bool
	flooding.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer flooding.Store(false)
		for i := 0; i < int(lasting/every); i++ {
			// Above B in address order, without the A flag (no SLAAC address).
			p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x0f, byte(i >> 8), byte(i), 0}), 64)
			b, err := ndp.MarshalMessage(&ndp.RouterAdvertisement{Options: []ndp.Option{&ndp.PrefixInformation{
				PrefixLength: 64, Prefix: p.Addr(), OnLink: true, ValidLifetime: time.Hour, PreferredLifetime: time.Hour}}})
			if err == nil && flooder.SendRA(b) == nil {
				sent.Add(1)
			}
			time.Sleep(every)
		}
	}()
	time.Sleep(8 * time.Second)
	advertise(t, w, prefixB, prefixA)
	poolIs(t, w, "B reaches the pool during the flood", prefixB.String(), prefixA.String())
	if !flooding.Load() {
		t.Errorf("B reached the pool only after the flood ended: the flood starved publication")
	}
	<-done
	settleWrites()

	perNode := map[string]int{}
	for _, wr := range writesBy(t, w, m, agentUser) {
		perNode[wr.Name]++
	}
	for _, n := range nodes {
		// The budget: 10 at once, then 12 a minute; the flood lasts 20 s.
		if perNode[n] > 10+4+1 {
			t.Errorf("%s wrote its digest %d times during the flood: beyond its write budget", n, perNode[n])
		}
		// The journal: info and above (the tests run agents at debug level,
		// which adds a line per RA).
		b, _ := os.ReadFile(filepath.Join(w.Dir, "agent-"+n+".log"))
		lines := bytes.Count(b[min(logSize[n], int64(len(b))):], []byte(" INF ")) +
			bytes.Count(b[min(logSize[n], int64(len(b))):], []byte(" WRN "))
		t.Logf("%s: %d RAs flooded in %s; %d digest writes (%.2f/s), %d log lines", n, sent.Load(), lasting, perNode[n],
			float64(perNode[n])/lasting.Seconds(), lines)
		if lines > 40 {
			t.Errorf("%s logged %d lines for %d flooded RAs: want a short journal", n, lines, sent.Load())
		}
	}
	if b := blocks(t, w, "lb"); !slices.Equal(b, []string{"192.0.2.0/24", prefixB.String(), prefixA.String()}) {
		t.Errorf("pool %v after the flood", b)
	}
}

// TestABurstOfRenumberingsKeepsTheNewestDraining: 36 real renumberings
// within one valid lifetime show each node more prefixes than a digest holds
// (32). The agents evict, among the draining prefixes, those with the least
// valid lifetime left - the oldest - so each digest keeps the 32 newest and
// the pool (maxPrefixHistory 10) the current prefix and the ten newest
// draining ones. Dropping the newest deprecated prefixes instead would take
// exactly those out of the pool while they still drain.
func TestABurstOfRenumberingsKeepsTheNewestDraining(t *testing.T) {
	w := newWorld(t, 2)
	p := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x0c, byte(i)}), 64)
	}
	advertise(t, w, p(0))
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"maxPrefixHistory": 10}})
	createPool(t, w)
	nodes := []string{"node1", "node2"}
	for _, n := range nodes {
		startAgent(t, w, n, "--publish-burst", "100", "--publish-per-minute", "600")
	}
	// Some 36 pool and status patches in about a minute: beyond the default
	// write budget, which would (rightly) throttle them.
	startWriter(t, w, "writer-a", "--budget-object-burst", "100", "--budget-object-per-minute", "600",
		"--budget-total-burst", "1000", "--budget-total-per-minute", "1000")
	poolIs(t, w, "pool follows the first prefix", p(0).String())

	const renumberings = 36
	for i := 1; i < renumberings; i++ {
		advertise(t, w, p(i), p(i-1)) // older ones are omitted: deprecated, still valid
		eventually(t, "home follows "+p(i).String(), func() (bool, string) {
			st := dpStatus(t, w, "home")
			return st.CurrentPrefix == p(i).String(), st.CurrentPrefix
		})
	}
	want := []string{p(renumberings - 1).String()}
	for i := renumberings - 2; i >= renumberings-11; i-- {
		want = append(want, p(i).String())
	}
	poolIs(t, w, "the current prefix and the ten newest draining ones", want...)
	for _, n := range nodes {
		waitDigest(t, w, n, "the 32 newest prefixes", func(d digest.Node) bool {
			var got []netip.Prefix
			for _, l := range d.Links {
				for _, e := range l.Prefixes {
					got = append(got, e.Prefix)
				}
			}
			if len(got) != digest.MaxPrefixes {
				return false
			}
			for i := renumberings - digest.MaxPrefixes; i < renumberings; i++ {
				if !slices.Contains(got, p(i)) {
					return false
				}
			}
			return true
		})
	}
}
