package e2e

import (
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestAReplayAsTheAgentRestartsHoldsNothingPastRadvdsWord: radvd
// advertises A (preferred 60 s, valid 600 s), re-sent alike, answering
// solicitations to all nodes (it may hold an answer 3.5 s). The agent
// stops; radvd reloads onto B with A deprecated - its last word of A
// preferred ends 60 s after the reload. 30 s later a host on radvd's
// link-local address replays radvd's old RA (A preferred 60 s) every 50 ms
// (every 150 ms once the agent runs), and the agent starts again. A
// running agent would have heard the reload and held A no longer than
// radvd stated; the restarted one must too.
//
// When observe.State.Remember kept the memory's Alike, a replay read as
// the first word after a restart moved A's ends on to the restart plus
// 60 s (TestAReplayRightAfterARestartRefreshesNothing, FuzzCorroboration).
// This world test passed all the same: the kernel's first link listing
// restarts the RA listener 1-2 ms after its first socket opened (agent
// log: listening .335, solicitation .337, "RA listener restarting" .337,
// first RA read .338), and that reopen forgets Alike before a word is
// read. It guards the day that incidental restart goes: a replay every
// 50 ms is read well before radvd's answer to the listener's solicitation
// (multicast, 3-3.5 s), and gentler on a shared machine than the 2 ms the
// test first flooded with to race the reopen, which it never won.
func TestAReplayAsTheAgentRestartsHoldsNothingPastRadvdsWord(t *testing.T) {
	w := newWorld(t, 1)
	w.Net.Router.MulticastAnswers = true
	ctx := t.Context()
	const valid, preferred = 600 * time.Second, 60 * time.Second
	trusted, agent := agentOnA(t, w, valid, preferred, "--conflict-hold", "15s")
	time.Sleep(20 * time.Second) // radvd re-sends A alike, corroborated: the memory says so

	w.Stop(agent, 5*time.Second)
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixB, Valid: valid, Preferred: preferred},
		world.Advert{Prefix: prefixA, Valid: valid, Preferred: 0}); err != nil {
		t.Fatal(err)
	}
	reloaded := time.Now()
	time.Sleep(30 * time.Second) // the agent is down

	sender := impostorSender(t, w, trusted)
	recorded := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixA, valid, preferred)})
	// Every 50 ms around the restart: the first word the restarted agent
	// reads is a replay, radvd's multicast answer seconds behind it.
	fast := sendEvery(sender, trusted, recorded, 50*time.Millisecond)
	startAgent(t, w, "node1", "--conflict-hold", "15s")
	waitLog(t, w, "agent-node1.log", "agent started", 2)
	time.Sleep(2 * time.Second)
	fast()
	defer sendEvery(sender, trusted, recorded, 150*time.Millisecond)()

	// radvd's last word of A preferred ends at reloaded+60s; sample from
	// 10 s past it (LifetimeSlack, a publication's delay) to the restart's
	// own +60 s.
	time.Sleep(time.Until(reloaded.Add(preferred + 10*time.Second)))
	for end := reloaded.Add(preferred + 25*time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		v, _ := annotation(t, w, "node1")
		n, err := digest.Decode(v)
		if err != nil {
			t.Fatalf("digest %q: %v", v, err)
		}
		if e, ok := find(n, prefixA); ok && !e.Deprecated {
			t.Fatalf("%s after radvd's reload (its last word of A preferred ended at %s), node1 reports %s",
				time.Since(reloaded).Round(time.Second), preferred, v)
		}
	}
}
