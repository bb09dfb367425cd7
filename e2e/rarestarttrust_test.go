package e2e

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestARouterDroppedFromTrustedRoutersIsNotRememberedAcrossARestart
// (memory red team): trustedRouters names radvd and a second router, which
// advertises X (valid and preferred a day). The agent believes both. The
// second router is found out: it stops, and the user drops it from
// trustedRouters while the agent is down. The restarted agent must not
// believe X on its memory: observe.State.Remember drops the word of a
// router the link no longer trusts, but the agent puts the memory back
// before it sets the links' policies (agent.setLinks), so Remember sees no
// trustedRouters and X is published preferred again, source ra, for the
// day the dropped router stated - and written to the memory again.
func TestARouterDroppedFromTrustedRoutersIsNotRememberedAcrossARestart(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	rogue, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := rogue.Advertise(ctx, world.Advert{Prefix: prefixX, Valid: 24 * time.Hour, Preferred: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	rogueLL, err := rogue.LinkLocal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	home, err := w.Net.Router.LinkLocal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trustingHome(t, w, map[string]any{"routerAdvertisement": map[string]any{"trustedRouters": []any{home.String(), rogueLL.String()}}})
	agent := startAgent(t, w, "node1")
	waitDigest(t, w, "node1", "A and X preferred", func(n digest.Node) bool {
		return has(prefixA, false, digest.SourceRA)(n) && has(prefixX, false, digest.SourceRA)(n)
	})
	time.Sleep(2 * time.Second) // the memory written

	rogue.Stop()
	w.Stop(agent, 5*time.Second)
	patchSpec(t, w, map[string]any{"acquisition": map[string]any{"routerAdvertisement": map[string]any{
		"interface": "eth0", "trustedRouters": []any{home.String()}}}})
	startAgent(t, w, "node1")
	waitLog(t, w, "agent-node1.log", "agent started", 2)
	time.Sleep(15 * time.Second) // the startup grace, and radvd's word corroborated
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		v, _ := annotation(t, w, "node1")
		n, err := digest.Decode(v)
		if err != nil {
			t.Fatalf("digest %q: %v", v, err)
		}
		// (The kernel's SLAAC address in X keeps it reported deprecated,
		// vouched for by the digest the agent published before: the seed's
		// rule, as before the memory.)
		if e, ok := find(n, prefixX); ok && !e.Deprecated {
			t.Fatalf("node1 reports %s: X preferred, remembered from a router trustedRouters no longer names", v)
		}
	}
}
