package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/digest"
)

// junkPrefix is the i-th of the forger's prefixes (2001:db8:b000::/36 holds
// 2^28 of them, none the router's).
func junkPrefix(i int) netip.Prefix {
	a := netip.MustParseAddr("2001:db8:b000::").As16()
	a[4] |= byte(i >> 24 & 0x0f)
	a[5], a[6], a[7] = byte(i>>16), byte(i>>8), byte(i)
	return netip.PrefixFrom(netip.AddrFrom16(a), 64)
}

// junkPIO is a deprecated prefix neither on-link nor autonomous: the node's
// kernel makes no address or route of it, the agent reads it all the same.
func junkPIO(i int, valid time.Duration) *ndp.PrefixInformation {
	return &ndp.PrefixInformation{PrefixLength: 64, Prefix: junkPrefix(i).Addr(), ValidLifetime: valid}
}

// TestTrustedRoutersDoNotLiftTheRATablesCap (issue 42, item 4): with
// trustedRouters set to the router's address, a host on that address sends
// radvd's own offer (B preferred, A draining) with junk beside it: 2,000 RAs
// with 40 new deprecated prefixes each, then for 10 s RAs with 31 deprecated
// prefixes valid for ever. Before the rework a trusted router's table had no
// cap (80,001 entries), and the 31 junk prefixes, outlasting A, pushed the
// real draining prefix out of the 32-prefix digest, ending its drain early.
// Now the agent keeps B preferred and A draining in its digest, reports no
// junk, its RA table stays within its cap, and it stays up.
func TestTrustedRoutersDoNotLiftTheRATablesCap(t *testing.T) {
	const maxRAEntries = 256 // observe's cap
	w := newWorld(t, 1)
	advertise(t, w, prefixB, prefixA)
	trusted := trustingHome(t, w, nil)
	agent := startAgent(t, w, "node1")
	waitDigest(t, w, "node1", "B preferred, A draining", all(has(prefixB, false, digest.SourceRA), has(prefixA, true, digest.SourceRA)))

	sender := impostorSender(t, w, trusted)
	// radvd's offer as advertise states it, then the junk.
	offer := func(junk ...*ndp.PrefixInformation) []byte {
		return copyOfRadvd(t, append([]*ndp.PrefixInformation{pioOf(prefixB, 600*time.Second, 300*time.Second), pioOf(prefixA, 600*time.Second, 0)}, junk...))
	}
	keeps := func() {
		t.Helper()
		v, _ := annotation(t, w, "node1")
		d, err := digest.Decode(v)
		if err != nil {
			t.Fatalf("digest %q: %v", v, err)
		}
		if !has(prefixB, false, digest.SourceRA)(d) || !has(prefixA, true, digest.SourceRA)(d) {
			t.Fatalf("the digest lost B preferred or A draining: %s", v)
		}
		for _, l := range d.Links {
			for _, p := range l.Prefixes {
				if p.Prefix != prefixA && p.Prefix != prefixB {
					t.Fatalf("the digest reports %s, which the router never offered: %s", p.Prefix, v)
				}
			}
		}
	}
	const entries = `renumber_agent_ra_entries{link="eth0"}`
	capped := func() {
		t.Helper()
		if v := agentMetric(t, w, "node1", entries); v < 1 || v > maxRAEntries {
			t.Fatalf("%s = %v, want 1..%d", entries, v, maxRAEntries)
		}
	}
	for i := range 2000 {
		junk := make([]*ndp.PrefixInformation, 40)
		for j := range junk {
			junk[j] = junkPIO(i*40+j, time.Hour)
		}
		if err := sender.Send(trusted, offer(junk...)); err != nil {
			t.Fatalf("forging: %v", err)
		}
		if i%100 == 99 {
			keeps()
			capped()
		}
	}
	junk := make([]*ndp.PrefixInformation, 31)
	for j := range junk {
		junk[j] = junkPIO(1<<20+j, ndp.Infinity)
	}
	forever := offer(junk...)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(150 * time.Millisecond) {
		if err := sender.Send(trusted, forever); err != nil {
			t.Fatalf("forging: %v", err)
		}
		keeps()
		capped()
	}
	// Past the window of the last forged word: what the agent settled on.
	settleWrites()
	keeps()
	capped()
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", agent.Process.Pid)); err != nil || strings.Contains(string(stat), ") Z ") {
		t.Fatalf("the agent exited: %q %v", stat, err)
	}
	nd, err := w.Net.Node("node1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nd.Get("http://[::1]:9470/metrics"); err != nil {
		t.Fatalf("the agent no longer serves its metrics: %v", err)
	}
	t.Logf("%s = %v after the flood", entries, agentMetric(t, w, "node1", entries))
}
