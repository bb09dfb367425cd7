package agent

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// trustedRouters changed while the agent was down - a rogue router found
// and dropped from the list - must not bring the rogue's word back from
// the memory. observe.State.Remember drops a word of a router the link's
// policy no longer trusts (TestAMemoryBelievesOnlyRoutersTrustedNow), and
// the agent sets the links' policies before it puts the memory back
// (setLinks). Before that order it put the memory back first: Remember saw
// no policy and believed every router's word, and the rogue's prefix X
// (remembered preferred, lifetimes infinite) was published preferred,
// source ra, by the restarted agent - with the router the user trusts
// silent or not - and written to the memory again for the next run.
func TestARestartedAgentRemembersNoRouterTrustedNoMore(t *testing.T) {
	dir := t.TempDir()
	rogue := netip.MustParseAddr("fe80::bad")
	pX := netip.MustParsePrefix("2001:db8:bad::/64")
	mem := aMemory(t0)
	mem.Links[0].Words = append(mem.Links[0].Words, observe.Remembered{
		Router: rogue, Prefix: pX, Since: t0.Add(-time.Hour),
		StatedValid: observe.Infinite, StatedPreferred: observe.Infinite, Heard: t0, // never ends
	})
	if err := saveMemory(dir, "", mem); err != nil {
		t.Fatal(err)
	}
	trusted := map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{router}}}
	got := publishedOnRestart(t, dir, trusted, nil)
	if want := "v1;eth0=2001:db8:a::/64 p ra"; len(got) != 1 || got[0] != want {
		t.Errorf("published %q, want %q: not the rogue's prefix, remembered from a router trustedRouters no longer names", got, want)
	}
}

// publishedOnRestart starts an agent on the memory under dir and the digest
// "A preferred", hands it links (as uplink.Watch does; hardware, when not
// nil, is each one's link-layer address), lets its startup grace pass with
// no RA, and returns what it published.
func publishedOnRestart(t *testing.T, dir string, links map[string]policy.Policy, hardware func(string) string) []string {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0.Add(time.Minute))
	rec := &recorder{kick: make(chan struct{}, 16)}
	asked := make(chan time.Time, 16)
	a := New(Config{StartupGrace: 5 * time.Second, StateDir: dir}, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), rec,
		func(link string, r Reports) Listener {
			return solicitingListener{link: link, clk: clk, r: r, asked: asked}
		}, mustDecode(t, "v1;eth0=2001:db8:a::/64 p ra"))
	if hardware != nil {
		a.hardware = hardware
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	a.SetLinks(links)
	sync_(a)
	clk.Step(5 * time.Second) // the grace, no RA
	waitPublishedWith(t, rec, clk, "a digest", func(string) bool { return true })
	return rec.values()
}

func mustDecode(t *testing.T, s string) digest.Node {
	t.Helper()
	n, err := digest.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Interfaces renamed across a reboot (eth0 and eth1 swapped) must not
// apply one link's memory to another: the memory of eth0, written of the
// interface with one link-layer address, is not put back on an eth0 whose
// address differs, and the agent says so. Its prefix X would otherwise be
// published preferred, source ra, on the word of a router not on the link;
// without it the restart falls back on the digest's seed, as with no file.
func TestAMemoryOfAnotherInterfaceIsNotUsed(t *testing.T) {
	for _, c := range []struct {
		name string
		now  string
		want string
	}{
		{"the same interface", "52:54:00:00:00:01", "v1;eth0=2001:db8:a::/64 p ra,2001:db8:bad::/64 p ra"},
		// The digest's seed alone, as with no memory (no kernel address
		// in A here: nothing to report).
		{"another interface", "52:54:00:00:00:02", "v1;eth0="},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mem := aMemory(t0)
			mem.Links[0].Hardware = "52:54:00:00:00:01"
			mem.Links[0].Words = append(mem.Links[0].Words, observe.Remembered{
				Router: router, Prefix: netip.MustParsePrefix("2001:db8:bad::/64"), Since: t0.Add(-time.Hour),
				StatedValid: observe.Infinite, StatedPreferred: observe.Infinite, Heard: t0,
			})
			if err := saveMemory(dir, "", mem); err != nil {
				t.Fatal(err)
			}
			got := publishedOnRestart(t, dir, map[string]policy.Policy{"eth0": {GlobalOnly: true}}, func(string) string { return c.now })
			if len(got) != 1 || got[0] != c.want {
				t.Errorf("published %q, want %q", got, c.want)
			}
		})
	}
}
