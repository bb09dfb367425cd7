package controller

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/writer/decide"
)

type events []string

func (e *events) Event(u *unstructured.Unstructured, warning bool, reason, note string) bool {
	*e = append(*e, u.GetKind()+"/"+u.GetName()+" uid "+string(u.GetUID())+" "+reason+": "+note)
	return true
}

// The shell reports what the node rule notes once: one journal line per
// garbled digest value (and its event), per vote that lapses and per vote
// back - never once per pass.
func TestTheBallotReportsEachChangeOnce(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	const a = "v1;eth0=2001:db8:a::/64 p ra+addr"
	nodes := []decide.Node{
		{Name: "ready", Digest: a, Reported: true},
		{Name: "down", Digest: a, Reported: true, NotReadySince: "2026-11-21T11:50:00Z"},
		{Name: "garbled", UID: "u1", Digest: "v1;eth0=::/0 <script>", Reported: true},
	}
	var log bytes.Buffer
	var ev events
	b := NewBallot(5*time.Minute, decide.StartupWait, func() []decide.Node { return nodes },
		slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{ReplaceAttr: noTime})), &ev)
	before := metricBadDigests.Value()
	b.Reports(now)
	b.Votes(now)
	b.Reports(now.Add(time.Minute))
	nodes[1].NotReadySince = ""
	b.Reports(now.Add(2 * time.Minute))

	wantLog := []string{
		`level=INFO msg="node not Ready past the grace period; its digest no longer votes" node=down grace=5m0s`,
		`level=WARN msg="ignoring garbled digest" node=garbled err=`,
		`level=INFO msg="node Ready again; its digest votes" node=down`,
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != len(wantLog) {
		t.Fatalf("journal:\n%s\nwant %d lines", log.String(), len(wantLog))
	}
	for i, want := range wantLog {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %s, want it to start %s", i, lines[i], want)
		}
	}
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Node/garbled uid u1 InvalidDigest: ignoring annotation "+digest.Annotation+": ") {
		t.Errorf("events %q, want one InvalidDigest on Node/garbled", ev)
	}
	if n := metricBadDigests.Value() - before; n != 1 {
		t.Errorf("renumber_writer_invalid_digests_total rose by %d, want 1", n)
	}
	text := string(metrics.NewRegistry(b.Collectors()...).Text())
	for _, want := range []string{`renumber_writer_nodes{state="reporting"} 2`, `renumber_writer_nodes{state="invalid"} 1`,
		`renumber_writer_nodes{state="not-ready"} 0`, `renumber_writer_nodes{state="missing"} 0`, "renumber_writer_invalid_digests_total "} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s:\n%s", want, text)
		}
	}
	if diff := cmp.Diff([]string{"down", "ready"}, reporting(b.Reports(now.Add(3*time.Minute)))); diff != "" {
		t.Errorf("voting (-want +got):\n%s", diff)
	}
}

func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func reporting(rs []decide.Report, _ time.Time) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Node)
	}
	return out
}
