package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/tools/world"
)

const shadowUser = "system:serviceaccount:renumber-system:renumber-shadow"

// startShadow starts a writer with --dry-run under the read-only shadow
// identity (manifests/shadow) and returns its metrics address.
func startShadow(t *testing.T, w *world.World, name string, extra ...string) string {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"--dry-run", "--log-level", "debug", "--metrics-addr", addr}, extra...)
	if _, err := w.StartWriterAs(t.Context(), "renumber-shadow", filepath.Join(binaries(t), "writer"), name, args...); err != nil {
		t.Fatal(err)
	}
	return addr
}

// planOf reads a shadow's /debug/plan.
func planOf(addr string) ([]permit.Change, error) {
	resp, err := http.Get("http://" + addr + "/debug/plan")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var doc permit.Document
	return doc.Changes, json.NewDecoder(resp.Body).Decode(&doc)
}

// planIs waits until the shadow at addr plans exactly want ("object field"),
// its metric agreeing, and returns the plan.
func planIs(t *testing.T, addr, what string, want ...string) []permit.Change {
	t.Helper()
	var got []permit.Change
	eventually(t, what, func() (bool, string) {
		cs, err := planOf(addr)
		if err != nil {
			return false, err.Error()
		}
		got = cs
		var fields []string
		for _, c := range cs {
			fields = append(fields, c.Object+" "+c.Field)
		}
		n := writerMetric(addr, "renumber_writer_plan_changes")
		return slices.Equal(fields, want) && n == float64(len(want)), fmt.Sprintf("%q (metric %v)", fields, n)
	})
	return got
}

// TestShadowWriter: a writer in dry-run mode next to the leader, under its own
// read-only identity. As a canary of the same version it agrees with the
// leader after a renumbering: its plan is empty. Configured to disagree (one
// DNS target key fewer), its plan holds exactly that difference, before and
// after a renumbering. Neither shadow makes a single API write (audit log).
func TestShadowWriter(t *testing.T) {
	w := haWorld(t, 2)
	m := mark(t, w)
	for _, n := range []string{"node1", "node2"} {
		startAgent(t, w, n)
	}
	startWriter(t, w, "writer-a")
	poolIs(t, w, "pool follows A", prefixA.String())
	canary := startShadow(t, w, "shadow-canary")
	planIs(t, canary, "the canary agrees with the leader")

	advertise(t, w, prefixB, prefixA)
	poolIs(t, w, "pool follows B", prefixB.String(), prefixA.String())
	planIs(t, canary, "the canary agrees after the renumbering")

	// Disagreeing on purpose: external-dns upgraded in the shadow's mind only.
	svc := "services/default/web metadata.annotations."
	differ := startShadow(t, w, "shadow-differ", "--external-dns-target-annotation-keys", holdings.AnnotationTarget)
	got := planIs(t, differ, "the disagreement planned", svc+holdings.AnnotationManagedTargetKeys, svc+holdings.AnnotationTargetAlpha)
	addrOn := func(p netip.Prefix) string {
		a, err := model.Splice(p, netip.MustParseAddr("::ffff:0:1"))
		if err != nil {
			t.Fatal(err)
		}
		return a.String()
	}
	if c := got[1]; c.From != addrOn(prefixB) || c.To != "" {
		t.Errorf("the alpha key should be planned removed from the current address: %s", c)
	}

	advertise(t, w, prefixC, prefixB)
	poolIs(t, w, "pool follows C", prefixC.String(), prefixB.String(), prefixA.String())
	eventually(t, "the disagreement follows the renumbering", func() (bool, string) {
		cs, err := planOf(differ)
		if err != nil || len(cs) != 2 {
			return false, fmt.Sprint(cs, err)
		}
		return cs[1].From == addrOn(prefixC), cs[1].String()
	})
	planIs(t, canary, "the canary agrees again")

	settleWrites()
	if ws := writesBy(t, w, m, shadowUser); len(ws) != 0 {
		t.Errorf("the shadows wrote: %v", ws)
	}
	if n := len(objectWrites(writesBy(t, w, m, writerUser))); n == 0 {
		t.Error("the leader wrote nothing: the test proves nothing")
	}
}
