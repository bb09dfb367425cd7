package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// poolIs waits until pool lb holds exactly the user block and these prefixes.
func poolIs(t *testing.T, w *world.World, what string, prefixes ...string) {
	t.Helper()
	want := append([]string{"192.0.2.0/24"}, prefixes...)
	eventually(t, what, func() (bool, string) {
		b := blocks(t, w, "lb")
		return slices.Equal(b, want), fmt.Sprint(b)
	})
}

// runningHome is homeWorld with two nodes, their agents and a writer, the
// pool following A and the writes settled.
func runningHome(t *testing.T) (*world.World, []string) {
	t.Helper()
	w := homeWorld(t, 2)
	nodes := []string{"node1", "node2"}
	for _, n := range nodes {
		startAgent(t, w, n)
	}
	startWriter(t, w, "writer-a")
	poolIs(t, w, "pool follows A", prefixA.String())
	settleWrites()
	return w, nodes
}

func leader(t *testing.T, w *world.World) string {
	t.Helper()
	l, err := w.API.Client.CoordinationV1().Leases(world.Namespace).Get(t.Context(), "renumber-writer", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		t.Fatalf("no leader: %v", err)
	}
	return *l.Spec.HolderIdentity
}

// historyIs waits until the status history of DynamicPrefix home satisfies want,
// and returns it.
func historyIs(t *testing.T, w *world.World, what string, want func([]api.HistoryEntry) bool) []api.HistoryEntry {
	t.Helper()
	var h []api.HistoryEntry
	eventually(t, "history: "+what, func() (bool, string) {
		h = dpStatus(t, w, "home").History
		return want(h), fmt.Sprintf("%+v", h)
	})
	return h
}

// TestDrainingFollowsLifetimes: the old prefix stays in the pools until the
// valid lifetime its router last advertised runs out, by a deadline computed
// once at the transition and kept in status - so it expires on time even when
// its only reporter's agent is gone and the leader changed meanwhile.
func TestDrainingFollowsLifetimes(t *testing.T) {
	w := homeWorld(t, 1)
	ctx := t.Context()
	agent := startAgent(t, w, "node1")
	writers := map[string]interface{ Kill() error }{}
	for _, name := range []string{"writer-a", "writer-b"} {
		writers[name] = startWriter(t, w, name).Process
	}
	poolIs(t, w, "pool follows A", prefixA.String())

	if err := w.Net.Router.Advertise(ctx,
		world.Advert{Prefix: prefixB, Valid: 600 * time.Second, Preferred: 300 * time.Second},
		world.Advert{Prefix: prefixA, Valid: 20 * time.Second, Preferred: 0},
	); err != nil {
		t.Fatal(err)
	}
	poolIs(t, w, "B current, A draining", prefixB.String(), prefixA.String())
	// The pool is patched before status: wait for status too.
	h := historyIs(t, w, "A draining with a deadline", func(h []api.HistoryEntry) bool {
		return len(h) == 2 && h[1].Prefix == prefixA.String() && h[1].State == "draining" && h[1].ExpiresAt != nil && h[1].DeprecatedAt != nil
	})
	deadline := h[1].ExpiresAt.Time
	if left := deadline.Sub(h[1].DeprecatedAt.Time); left <= 0 || left > 20*time.Second {
		t.Errorf("A expires %s after its deprecation; the router gave it 20 s", left)
	}

	// The only node's agent goes away (its digest still lists A), and the leader
	// is killed: the standby must expire A from status alone.
	w.Stop(agent, 5*time.Second)
	settleWrites()
	m := mark(t, w)
	if err := writers[leader(t, w)].Kill(); err != nil {
		t.Fatal(err)
	}
	poolIs(t, w, "A expired", prefixB.String())
	historyIs(t, w, fmt.Sprintf("A expired with the deadline %v unchanged", deadline), func(h []api.HistoryEntry) bool {
		return len(h) == 2 && h[1].State == "expired" && h[1].ExpiresAt != nil && h[1].ExpiresAt.Time.Equal(deadline)
	})
	settleWrites()
	got := objectWrites(writesBy(t, w, m, writerUser))
	want := []string{"patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200"}
	if !slices.Equal(got, want) {
		t.Errorf("writes from the handover to the expiry:\n got %q\nwant %q", got, want)
	}
}

// TestRouterReboot: a router that reboots onto the same prefix changes nothing;
// one that comes back with a new ISP prefix (and never mentions the old one,
// which the kernel keeps preferred) is followed at once; the old prefix coming
// back later is reactivated, not duplicated.
func TestRouterReboot(t *testing.T) {
	w, nodes := runningHome(t)
	ctx := t.Context()

	reboot := func(ads ...world.Advert) {
		t.Helper()
		w.Net.Router.Stop()
		time.Sleep(8 * time.Second) // two RA intervals of silence
		if err := w.Net.Router.Advertise(ctx, ads...); err != nil {
			t.Fatal(err)
		}
	}
	fresh := func(p string) world.Advert {
		return world.Advert{Prefix: netipPrefix(p), Valid: 600 * time.Second, Preferred: 300 * time.Second}
	}

	t.Run("same prefix: no writes", func(t *testing.T) {
		m := mark(t, w)
		reboot(fresh(prefixA.String()))
		time.Sleep(8 * time.Second) // RAs flow again
		ws, err := w.API.WritesSince(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		for _, wr := range ws {
			if wr.Resource != "leases" {
				t.Errorf("write after a reboot onto the same prefix: %s", wr)
			}
		}
	})

	t.Run("new prefix, old one never mentioned: followed, old one drains", func(t *testing.T) {
		m := mark(t, w)
		reboot(fresh(prefixB.String()))
		poolIs(t, w, "B current, A draining", prefixB.String(), prefixA.String())
		settleWrites()
		if cur := dpStatus(t, w, "home").CurrentPrefix; cur != prefixB.String() {
			t.Errorf("current = %s, want B", cur)
		}
		onePatchPerNode(t, writesBy(t, w, m, agentUser), nodes...)
		got := objectWrites(writesBy(t, w, m, writerUser))
		want := []string{"patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200"}
		if !slices.Equal(got, want) {
			t.Errorf("writer writes:\n got %q\nwant %q", got, want)
		}
	})

	t.Run("the old prefix comes back: reactivated, not duplicated", func(t *testing.T) {
		reboot(fresh(prefixA.String()))
		poolIs(t, w, "A current again, B draining", prefixA.String(), prefixB.String())
		historyIs(t, w, "A active, B draining", func(h []api.HistoryEntry) bool {
			return len(h) == 2 && h[0].Prefix == prefixA.String() && h[0].State == "active" &&
				h[1].Prefix == prefixB.String() && h[1].State == "draining"
		})
	})
}

// TestNotReadyNodeStopsVoting: a node whose agent died keeps its last digest;
// while the Node is Ready it votes (a tie keeps the current prefix). Once it
// has been NotReady past the grace it stops voting, so the live node's view
// wins; back to Ready it votes again, and a tie does not flip the current prefix.
func TestNotReadyNodeStopsVoting(t *testing.T) {
	w := homeWorld(t, 2)
	ctx := t.Context()
	startAgent(t, w, "node1")
	dead := startAgent(t, w, "node2")
	startWriter(t, w, "writer-a", "--node-not-ready-grace", "10s")
	poolIs(t, w, "pool follows A", prefixA.String())
	waitDigest(t, w, "node2", "A preferred", has(prefixA, false, digest.SourceRA))

	w.Stop(dead, 5*time.Second) // node2's digest stays: A preferred
	advertise(t, w, prefixB, prefixA)
	waitLog(t, w, "agent-node1.log", "prefix "+prefixB.String()+" appeared", 1)
	settleWrites()
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != prefixA.String() {
		t.Fatalf("current = %s with one vote each; a tie keeps the current prefix", st.CurrentPrefix)
	}

	ready := func(status string) {
		t.Helper()
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"reason":"Test","message":"set by the test",`+
			`"lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`, status, time.Now().UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339))
		if _, err := w.API.Client.CoreV1().Nodes().Patch(ctx, "node2", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	ready("False")
	poolIs(t, w, "node2 lapsed: B current, A draining", prefixB.String(), prefixA.String())
	waitLog(t, w, "writer-a.log", "its digest no longer votes", 1)

	ready("True")
	waitLog(t, w, "writer-a.log", "node Ready again; its digest votes", 1)
	settleWrites()
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != prefixB.String() {
		t.Errorf("current = %s after node2 came back: a tie must not flip it", st.CurrentPrefix)
	}
}
