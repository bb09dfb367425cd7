package e2e

import (
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestAContradictionAcrossAnAgentRestartDeprecatesNothingRadvdStates (RA
// red team, second round): radvd advertises A (preferred 300 s, valid
// 600 s) and never changes. A host on radvd's link-local address sends
// radvd's RA with A deprecated every 150 ms. The running agent holds A
// preferred, the conflict reported (radvd's believed offer doubted, held
// for its stated preferred lifetime: the documented stall). The agent
// restarts while the host goes on (a rollout) and must hold A as the
// running agent did: it remembers what radvd stated (--state-dir). Before
// that memory its seed ended at the first contradiction, radvd's word was
// never believed while the host spoke, and A was reported deprecated on
// nobody's word but the host's.
func TestAContradictionAcrossAnAgentRestartDeprecatesNothingRadvdStates(t *testing.T) {
	w := newWorld(t, 1)
	const valid, preferred = 600 * time.Second, 300 * time.Second
	trusted, agent := agentOnA(t, w, valid, preferred, "--conflict-hold", "15s")

	sender := impostorSender(t, w, trusted)
	forged := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixA, valid, 0)})
	defer sendEvery(sender, trusted, forged, 150*time.Millisecond)()
	sample := func(what string, d time.Duration) {
		t.Helper()
		var conflicts int
		start := time.Now()
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			v, _ := annotation(t, w, "node1")
			n, err := digest.Decode(v)
			if err != nil {
				t.Fatalf("digest %q: %v", v, err)
			}
			if e, ok := find(n, prefixA); !ok || e.Deprecated {
				t.Fatalf("%s: %s in, node1 reports %s; radvd states A preferred in every RA", what, time.Since(start).Round(time.Second), v)
			}
			if len(n.Links) > 0 && n.Links[0].Conflict {
				conflicts++
			}
		}
		if conflicts == 0 {
			t.Errorf("%s: no conflict reported in %s of samples", what, d)
		}
	}
	sample("the running agent, the host contradicting radvd", 15*time.Second)

	w.Stop(agent, 5*time.Second)
	startAgent(t, w, "node1", "--conflict-hold", "15s")
	waitLog(t, w, "agent-node1.log", "agent started", 2)
	// Startup grace (10 s, once more while radvd's first word is being
	// corroborated), then 20 s of the host going on.
	sample("the restarted agent, the host going on", 40*time.Second)
}

// TestAnUntrustedHostLengthensNoSeedWhileTheRouterIsSilent (RA red team,
// second round): radvd advertises A (preferred 30 s, valid 600 s), and
// trustedRouters names it. radvd goes silent (down, or rebooting onto a new
// prefix). A host under its own link-local address - untrusted: the agents
// record nothing of its RA - advertises A preferred for ever, and every
// node's kernel makes its SLAAC address in A preferred for ever. node1's
// agent restarts; node2's does not. node2 reports A deprecated once the 30 s
// radvd stated run out, and so must node1, from its memory of radvd's word.
// Before that memory node1, seeded with A preferred, counted the kernel's
// flags (seedCap: no RA believed, nothing contradicted, capped by the
// kernel's lifetimes as first seen - the host's) and reported A preferred.
func TestAnUntrustedHostLengthensNoSeedWhileTheRouterIsSilent(t *testing.T) {
	w := newWorld(t, 2)
	ctx := t.Context()
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixA, Valid: 600 * time.Second, Preferred: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	trustingHome(t, w, nil)
	agent1 := startAgent(t, w, "node1")
	startAgent(t, w, "node2")
	for _, node := range []string{"node1", "node2"} {
		waitDigest(t, w, node, "A preferred", has(prefixA, false, digest.SourceRA))
	}
	w.Net.Router.Stop()
	silent := time.Now()
	host, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	sender, err := host.Sender()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sender.Close() })
	forever := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixA, ndp.Infinity, ndp.Infinity)})
	for range 3 {
		if err := sender.Send(netip.Addr{}, forever); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	w.Stop(agent1, 5*time.Second)
	startAgent(t, w, "node1")
	waitLog(t, w, "agent-node1.log", "agent started", 2)
	// radvd's stated preferred lifetime has run out, and node1's startup
	// grace (10 s) passed.
	time.Sleep(max(time.Until(silent.Add(45*time.Second)), 15*time.Second))
	digests := map[string]string{}
	for _, node := range []string{"node1", "node2"} {
		digests[node], _ = annotation(t, w, node)
	}
	preferredA := func(v string) bool {
		n, err := digest.Decode(v)
		if err != nil {
			t.Fatalf("digest %q: %v", v, err)
		}
		e, ok := find(n, prefixA)
		return ok && !e.Deprecated
	}
	if preferredA(digests["node2"]) {
		t.Fatalf("node2 (not restarted) reports %s: want A deprecated, radvd's 30 s ran out", digests["node2"])
	}
	if preferredA(digests["node1"]) {
		t.Errorf("node1 (restarted) reports %s, %s after radvd went silent having stated A preferred 30 s (node2: %s)",
			digests["node1"], time.Since(silent).Round(time.Second), digests["node2"])
	}
}
