package e2e

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestADeprecatedPrefixStaysDeprecatedAcrossAnAgentRestart (RA red team):
// radvd advertises A, then renumbers to B by omitting A (a router that just
// stops mentioning it: docs/security.md says it renumbers). The agent
// reports A deprecated. The agent restarts (a rollout, an OOM kill): the
// kernel still holds A's SLAAC address preferred - RFC 4862 deprecates
// nothing on omission - and the restarted agent, seeded with its digest,
// counts that address with the kernel's flags: A is reported preferred
// again, with no adversary on the link, for what is left of A's preferred
// lifetime (radvd's default AdvPreferredLifetime is 4 h).
func TestADeprecatedPrefixStaysDeprecatedAcrossAnAgentRestart(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	r := w.Net.Router
	if err := r.Advertise(ctx, world.Advert{Prefix: prefixA, Valid: 600 * time.Second, Preferred: 300 * time.Second}); err != nil {
		t.Fatal(err)
	}
	trustingHome(t, w, nil)
	agent := startAgent(t, w, "node1")
	waitDigest(t, w, "node1", "A preferred", has(prefixA, false, digest.SourceRA))
	if err := r.Advertise(ctx, world.Advert{Prefix: prefixB, Valid: 600 * time.Second, Preferred: 300 * time.Second}); err != nil {
		t.Fatal(err)
	}
	deprecatedA := func(n digest.Node) bool { e, ok := find(n, prefixA); return ok && e.Deprecated }
	before := waitDigest(t, w, "node1", "B preferred, A deprecated (omitted)", all(has(prefixB, false, digest.SourceRA), deprecatedA))
	t.Logf("before the restart: %s", before)

	w.Stop(agent, 5*time.Second)
	startAgent(t, w, "node1")
	waitLog(t, w, "agent-node1.log", "agent started", 2)
	// 30 s of samples: startup grace, the router's first word corroborated,
	// several RAs (interval 3-4 s).
	for range 150 {
		v, _ := annotation(t, w, "node1")
		n, err := digest.Decode(v)
		if err != nil {
			t.Fatalf("digest %q: %v", v, err)
		}
		if e, ok := find(n, prefixA); ok && !e.Deprecated {
			t.Fatalf("after the restart the agent reports A preferred again: %s (before: %s)", v, before)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
