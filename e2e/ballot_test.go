package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/tools/world"
)

// The ballot against one lying node (issue 42, items 12, 13 and 6): node3
// runs no agent; whoever holds its agent's token writes its digest.

// forger writes node's digest with that node's agent token, as a stolen
// token would.
func forger(t *testing.T, w *world.World, node string) func(string) {
	t.Helper()
	id, err := w.API.ServiceAccount(t.Context(), "renumber-agent", node)
	if err != nil {
		t.Fatal(err)
	}
	cl := kubernetes.NewForConfigOrDie(id.Config)
	return func(v string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, digest.Annotation, v)
		if _, err := cl.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("%s's agent token writing its digest: %v", node, err)
		}
	}
}

// reportsNot waits until node's digest no longer names p.
func reportsNot(t *testing.T, w *world.World, node string, p netip.Prefix) {
	t.Helper()
	eventually(t, node+" no longer reports "+p.String(), func() (bool, string) {
		v, _ := annotation(t, w, node)
		return !strings.Contains(v, p.String()+" "), v
	})
}

// TestAForgedDrainEndsWithTheHonestNodes (item 12): the router renumbers
// while the writer is down, and the old prefix runs out on the two honest
// nodes before it is back; node3 claims the old prefix drains for 136 years,
// then (the next renumbering) with no lifetime at all. Their silence counts:
// the old prefix is never kept pooled on node3's word.
func TestAForgedDrainEndsWithTheHonestNodes(t *testing.T) {
	w := newWorld(t, 3)
	ctx := t.Context()
	// Short lifetimes: the kernel never shortens a valid lifetime below two
	// hours on an RA's word, so only what it was given last runs out.
	short := func(cur netip.Prefix) {
		t.Helper()
		if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: cur, Valid: 30 * time.Second, Preferred: 20 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	short(prefixA)
	minimalDP(t, w, "home")
	createPool(t, w)
	for _, n := range []string{"node1", "node2"} {
		startAgent(t, w, n)
	}
	forge := forger(t, w, "node3")
	forge("v1;eth0=" + prefixA.String() + " p ra")
	writer := startWriter(t, w, "writer-a")
	poolIs(t, w, "pool follows A", prefixA.String())

	for _, step := range []struct {
		old, cur netip.Prefix
		claim    string // node3's word on the old prefix
	}{
		{prefixA, prefixB, "d4294967295"},
		{prefixB, prefixC, "d"},
	} {
		// The router renumbers and no longer mentions the old prefix: the
		// honest agents report it deprecated until its lifetime runs out.
		w.Stop(writer, 10*time.Second)
		short(step.cur)
		forge(fmt.Sprintf("v1;eth0=%s %s ra,%s p ra", step.old, step.claim, step.cur))
		reportsNot(t, w, "node1", step.old)
		reportsNot(t, w, "node2", step.old)
		m := mark(t, w)
		writer = startWriter(t, w, "writer-a")
		poolIs(t, w, fmt.Sprintf("%s alone, %s not drained on node3's %q", step.cur, step.old, step.claim), step.cur.String())
		historyIs(t, w, step.old.String()+" expired", func(h []api.HistoryEntry) bool {
			return len(h) >= 2 && h[0].Prefix == step.cur.String() && h[1].Prefix == step.old.String() && h[1].State == model.StateExpired
		})
		settleWrites()
		if got := objectWrites(writesBy(t, w, m, writerUser)); poolWrites(got) != 1 {
			t.Errorf("writes %q, want one pool write (%s in, %s out)", got, step.cur, step.old)
		}
		if b := blocks(t, w, "lb"); !slices.Equal(b, []string{"192.0.2.0/24", step.cur.String()}) {
			t.Errorf("pool %v after the writes settled", b)
		}
	}
}

// TestOneNodeDoesNotAdoptOnAFreshInstall (item 13): the writer runs before
// any agent; node3's token claims X. Nothing is adopted on that alone, nor
// with one honest node beside it; the second honest node's report adopts A
// at once - within the normal startup spread, not after the ballot's wait.
func TestOneNodeDoesNotAdoptOnAFreshInstall(t *testing.T) {
	w := homeWorld(t, 3)
	forger(t, w, "node3")("v1;eth0=" + prefixX.String() + " p ra")
	m := mark(t, w)
	startWriter(t, w, "writer-a")
	waitLog(t, w, "writer-a.log", "leading", 1)
	settleWrites()
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != "" {
		t.Fatalf("adopted %s on node3's report alone", st.CurrentPrefix)
	}
	startAgent(t, w, "node1")
	eventually(t, "node1 reports A", func() (bool, string) {
		v, _ := annotation(t, w, "node1")
		return strings.Contains(v, prefixA.String()+" p"), v
	})
	settleWrites()
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != "" {
		t.Fatalf("adopted %s with one honest node of three reporting", st.CurrentPrefix)
	}
	start := time.Now()
	startAgent(t, w, "node2")
	poolIs(t, w, "pool follows A", prefixA.String())
	t.Logf("A adopted %s after node2's agent started (the ballot awaits a Node for %s)", time.Since(start).Round(100*time.Millisecond), time.Minute)
	settleWrites()
	if got := objectWrites(writesBy(t, w, m, writerUser)); poolWrites(got) != 1 {
		t.Errorf("writes %q, want one pool write (A, once)", got)
	}
}

// TestTheWholeUnicastRangeIsNeverCurrentByDefault (item 6): every node
// reports 2000::/3 preferred - a spoof that reached them all - and a
// DynamicPrefix without length bounds does not adopt it: an RA's prefix is
// a /64 unless the user asks otherwise. The rejection is reported; once the
// user asks for it, it is adopted (the bound is a default, not a rule).
func TestTheWholeUnicastRangeIsNeverCurrentByDefault(t *testing.T) {
	w := homeWorld(t, 3)
	for _, n := range []string{"node1", "node2", "node3"} {
		forger(t, w, n)("v1;eth0=2000::/3 p ra")
	}
	startWriter(t, w, "writer-a")
	eventually(t, "2000::/3 rejected", func() (bool, string) {
		evs, err := w.API.Client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=PrefixRejected"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "2000::/3") && strings.Contains(e.Message, "minPrefixLength") {
				return true, e.Message
			}
		}
		return false, fmt.Sprint(len(evs.Items), " PrefixRejected events")
	})
	settleWrites()
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != "" {
		t.Errorf("current %s, want none", st.CurrentPrefix)
	}
	if b := blocks(t, w, "lb"); !slices.Equal(b, []string{"192.0.2.0/24"}) {
		t.Errorf("pool %v, want the user's block alone", b)
	}
	patch := `{"spec":{"acquisition":{"prefixFilter":{"minPrefixLength":3}}}}`
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(t.Context(), "home", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poolIs(t, w, "2000::/3 once the user asks", "2000::/3")
}
