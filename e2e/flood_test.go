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
