package e2e

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestARestartWithTwoRoutersWritesNothing (issue 42, the restart doubt):
// two radvd routers on one link, the home router advertising A and a
// second router B (radvd's defaults: unicast answers, an RA every 3-4 s in
// this world), and an agent restarted three times, keeping no memory of
// the routers (--state-dir=, as on a node whose file was lost: it restarts
// on its digest's seed alone) or keeping it. Nothing changes, so the restart must write nothing.
// Before the fix the link's first believed RA (either router's) ended the
// seed's word on the other router's prefix: published deprecated, then
// preferred again once that router's RA was believed - two writes (each
// of 3 restarts). With the memory (the harness's --state-dir) it never
// wrote: a remembered word is not seeded.
func TestARestartWithTwoRoutersWritesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"the digest's seed alone", []string{"--state-dir="}},
		{"the memory", nil}, // the harness's own --state-dir: never failed
	} {
		t.Run(c.name, func(t *testing.T) { restartWithTwoRouters(t, c.args) })
	}
}

func restartWithTwoRouters(t *testing.T, args []string) {
	w := newWorld(t, 1)
	ctx := t.Context()
	const valid, preferred = 600 * time.Second, 300 * time.Second
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixA, Valid: valid, Preferred: preferred}); err != nil {
		t.Fatal(err)
	}
	second, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Advertise(ctx, world.Advert{Prefix: prefixB, Valid: valid, Preferred: preferred}); err != nil {
		t.Fatal(err)
	}
	agent := startAgent(t, w, "node1", args...)
	want := "v1;eth0=" + prefixA.String() + " p ra," + prefixB.String() + " p ra"
	waitDigest(t, w, "node1", "A and B preferred, each from its router's RA", func(n digest.Node) bool {
		v, err := digest.Encode(n)
		return err == nil && v == want
	})
	settleWrites()

	for i := range 3 { // the routers' timing around the restart differs each time
		m := mark(t, w)
		w.Stop(agent, 5*time.Second)
		agent = startAgent(t, w, "node1", args...)
		waitLog(t, w, "agent-node1.log", "agent started", i+2)
		time.Sleep(25 * time.Second) // the startup grace, twice (10 s each), and some
		if ws := writesBy(t, w, m, agentUser); len(ws) != 0 {
			v, _ := annotation(t, w, "node1")
			t.Errorf("restart %d wrote %d times (digest now %q): %v", i+1, len(ws), v, ws)
		}
	}
}
