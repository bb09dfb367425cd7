package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/inspect"
	"github.com/renumber/renumber/tools/world"
)

// eventMessage waits for an event reason about name and returns its message.
func eventMessage(t *testing.T, w *world.World, reason, name string) string {
	t.Helper()
	var msg string
	eventually(t, "event "+reason+" for "+name, func() (bool, string) {
		evs, err := w.API.Client.EventsV1().Events("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Regarding.Name == name {
				msg = e.Note
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
	return msg
}

// TestAHugeDigestIsRefusedAndExplainedByItsSize (issue 42): node2's agent
// token - what one node holds - writes its own Node's digest 70,000 bytes
// long (the agent's admission policy lets it write any value there; a digest
// is at most 2,048). The writer counts no vote from it and writes nothing
// for it (the pool stays with node1's A), and both the InvalidDigest event
// and kubectl renumber status, run with the read-only role, give its real
// size - not the 2,049 bytes the writer's Node cache keeps of it.
func TestAHugeDigestIsRefusedAndExplainedByItsSize(t *testing.T) {
	w := newWorld(t, 2)
	advertise(t, w, prefixA)
	minimalDP(t, w, "home")
	createPool(t, w)
	id := statusIdentity(t, w)
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a", "--node-startup-wait", "0") // node2 runs no agent
	poolIs(t, w, "pool follows A", prefixA.String())
	settleWrites()

	m := mark(t, w)
	const size = 70000
	head := "v1;eth0=" + prefixB.String() + " p ra;"
	forger(t, w, "node2")(head + strings.Repeat("x", size-len(head)))
	want := fmt.Sprintf("%d bytes, at most %d", size, digest.MaxBytes)
	if msg := eventMessage(t, w, "InvalidDigest", "node2"); !strings.Contains(msg, want) {
		t.Errorf("the InvalidDigest event says %q, want %q in it", msg, want)
	}
	out, code := statusExit(t, id, "-o", "json")
	var r inspect.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.DynamicPrefixes) != 1 {
		t.Fatalf("kubectl renumber status (exit %d): %v\n%s", code, err, out)
	}
	var problem string
	for _, v := range r.DynamicPrefixes[0].Votes {
		if v.Node == "node2" {
			problem = v.Problem
		} else if v.Problem != "" {
			t.Errorf("%s's vote: %q", v.Node, v.Problem)
		}
	}
	if wantProblem := "digest cannot be read: digest: invalid: " + want; problem != wantProblem {
		t.Errorf("kubectl renumber status explains node2's digest as %q, want %q", problem, wantProblem)
	}
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != prefixA.String() {
		t.Errorf("the huge digest moved the prefix to %s", st.CurrentPrefix)
	}
	settleWrites()
	if got := objectWrites(writesBy(t, w, m, writerUser)); len(got) != 0 {
		t.Errorf("the huge digest made the writer write %q", got)
	}
}
