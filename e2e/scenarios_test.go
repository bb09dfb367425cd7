package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestEtcdRestartUnderTheAPIServer: watches recover after etcd restarts, and a
// change made while etcd was down lands.
func TestEtcdRestartUnderTheAPIServer(t *testing.T) {
	w := homeWorld(t, 1)
	ctx := t.Context()
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")
	eventually(t, "pool on A", func() (bool, string) {
		b := blocks(t, w, "lb")
		return slices.Contains(b, prefixA.String()), fmt.Sprint(b)
	})
	if err := w.API.StopEtcd(); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixB, prefixA)
	time.Sleep(10 * time.Second) // the agent's patch fails meanwhile and is retried with backoff
	if err := w.API.StartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	// The agent's retries and the writer's watches back off while etcd is
	// down (up to 30 s each): how soon it lands is the backoff's, not asserted.
	eventuallyWithin(t, 2*time.Minute, "the change made while etcd was down lands", func() (bool, string) {
		b := blocks(t, w, "lb")
		return slices.Equal(b, []string{"192.0.2.0/24", prefixB.String(), prefixA.String()}), fmt.Sprint(b)
	})
}

// TestRogueRouterIsNotAdopted: a router reaching one node of three with a
// foreign prefix changes nothing (majority, and the allowlist), and is reported.
func TestRogueRouterIsNotAdopted(t *testing.T) {
	w := newWorld(t, 3)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0"},
		"prefixFilter":        map[string]any{"allowedPrefixes": []any{"2001:db8:1::/48"}},
	}})
	for _, n := range []string{"node1", "node2", "node3"} {
		startAgent(t, w, n)
	}
	startWriter(t, w, "writer-a")
	eventually(t, "home follows A", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == prefixA.String(), st.CurrentPrefix
	})
	settleWrites()
	rogue, err := w.Net.RogueRouter(ctx, "node1")
	if err != nil {
		t.Fatal(err)
	}
	foreign := netip.MustParsePrefix("2001:db8:bad::/64")
	m := mark(t, w)
	if err := rogue.Advertise(ctx, world.Advert{Prefix: foreign, Valid: 600 * time.Second, Preferred: 300 * time.Second}); err != nil {
		t.Fatal(err)
	}
	waitDigest(t, w, "node1", "node1 sees the rogue prefix", has(foreign, false, digest.SourceRA))
	waitEvent(t, w, "PrefixRejected", "home")
	settleWrites()
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != prefixA.String() {
		t.Errorf("current prefix moved to %s", st.CurrentPrefix)
	}
	ws, _ := w.API.WritesSince(ctx, m)
	for _, wr := range world.Filter(ws, world.ByUser(writerUser)) {
		if wr.Resource != "leases" && wr.Resource != "events" {
			t.Errorf("the rogue prefix caused a write: %s", wr)
		}
	}
}
