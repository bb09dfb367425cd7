package e2e

import (
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// agentOnA is how every restart test begins: the world's router advertises
// A with these lifetimes, the DynamicPrefix home trusts it (its address is
// returned), and node1's agent (with extra flags) runs until its digest
// carries A preferred.
func agentOnA(t *testing.T, w *world.World, valid, preferred time.Duration, extra ...string) (netip.Addr, *exec.Cmd) {
	t.Helper()
	if err := w.Net.Router.Advertise(t.Context(), world.Advert{Prefix: prefixA, Valid: valid, Preferred: preferred}); err != nil {
		t.Fatal(err)
	}
	trusted := trustingHome(t, w, nil)
	agent := startAgent(t, w, "node1", extra...)
	waitDigest(t, w, "node1", "A preferred", has(prefixA, false, digest.SourceRA))
	return trusted, agent
}

// TestADeprecatedPrefixStaysDeprecatedAcrossAnAgentRestart (RA red team):
// radvd advertises A, then renumbers to B by omitting A (a router that just
// stops mentioning it: docs/security.md says it renumbers). The agent
// reports A deprecated. The agent restarts (a rollout, an OOM kill): the
// kernel still holds A's SLAAC address preferred - RFC 4862 deprecates
// nothing on omission. A stays deprecated in the restarted agent's digest.
// Before the fix the restarted agent, seeded with its digest, counted that
// address with the kernel's flags: A was reported preferred again, with no
// adversary on the link, for what was left of A's preferred lifetime
// (radvd's default AdvPreferredLifetime is 4 h).
func TestADeprecatedPrefixStaysDeprecatedAcrossAnAgentRestart(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	r := w.Net.Router
	_, agent := agentOnA(t, w, 600*time.Second, 300*time.Second)
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

// TestASpooferCannotBringBackAPrefixTheRouterOmitted (RA red team): radvd
// advertises A, the writer follows it; radvd renumbers to B omitting A (B
// preferred 30 s, valid 120 s, short legal lifetimes) and the writer
// follows B. The agent restarts. A host on radvd's link-local address then
// replays radvd's RA from before the renumbering (A preferred) every 150 ms.
// The replays contradict radvd and are reported; B's believed offer is
// doubted and runs out of the preferred lifetime radvd stated (the
// documented bound); and the kernel, taking every replay, keeps A's SLAAC
// address preferred. The writer must never move back to A. Before the fix
// the restarted agent counted that address: its digest said A preferred,
// alone, and the one-node cluster's writer moved to A - a prefix radvd
// stopped offering.
func TestASpooferCannotBringBackAPrefixTheRouterOmitted(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	const validA, preferredA = 600 * time.Second, 300 * time.Second
	trusted, agent := agentOnA(t, w, validA, preferredA, "--conflict-hold", "15s")
	startWriter(t, w, "writer-a")
	eventually(t, "the writer follows A", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == prefixA.String(), st.CurrentPrefix
	})
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixB, Valid: 120 * time.Second, Preferred: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the writer follows B", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == prefixB.String(), st.CurrentPrefix
	})
	w.Stop(agent, 5*time.Second)
	startAgent(t, w, "node1", "--conflict-hold", "15s")
	waitLog(t, w, "agent-node1.log", "agent started", 2)
	// The annotation from before the restart says B already: give the
	// restarted agent its startup grace and radvd's word corroborated.
	time.Sleep(15 * time.Second)
	waitDigest(t, w, "node1", "B after the restart", has(prefixB, false, digest.SourceRA))

	sender := impostorSender(t, w, trusted)
	recorded := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixA, validA, preferredA)})
	defer sendEvery(sender, trusted, recorded, 150*time.Millisecond)()
	// B's preferred lifetime (30 s) runs out meanwhile; sample for 60 s.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if st := dpStatus(t, w, "home"); st.CurrentPrefix == prefixA.String() {
			v, _ := annotation(t, w, "node1")
			t.Fatalf("the writer moved back to A, which radvd stopped offering: node1's digest %s", v)
		}
		time.Sleep(500 * time.Millisecond)
	}
	v, _ := annotation(t, w, "node1")
	t.Logf("after 60 s of replays: %s, current %s", v, dpStatus(t, w, "home").CurrentPrefix)
}

// sendEvery sends msg from src every interval until the returned halt is
// called (once).
func sendEvery(sender *world.RASender, src netip.Addr, msg []byte, interval time.Duration) (halt func()) {
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			_ = sender.Send(src, msg) // no t.Fatal off the test's goroutine
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
		}
	}()
	return func() { close(stop); <-stopped }
}
