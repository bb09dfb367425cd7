package decide

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/digest"
)

type noEvents struct{ n int }

func (e *noEvents) Event(*unstructured.Unstructured, bool, string, string) { e.n++ }

func node(name, value string, ready corev1.ConditionStatus, since string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
		digest.Annotation: value, "kubernetes.io/unrelated": "dropped"}}}
	if ready != "" {
		at, _ := time.Parse(time.RFC3339, since)
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(at)},
		}
	}
	return n
}

func TestNodeRule(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	ev := &noEvents{}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	r := New(5*time.Minute, store.List, slog.New(slog.NewTextHandler(io.Discard, nil)), ev)
	const a = "v1;eth0=2001:db8:a::/64 p ra+addr"
	for _, n := range []*corev1.Node{
		node("fresh", a, "", ""), // no kubelet report yet: votes
		node("ready", a, "True", "2026-11-21T10:00:00Z"),
		node("flaky", a, "Unknown", "2026-11-21T11:58:00Z"),  // 2 min: still votes
		node("down", a, "False", "2026-11-21T11:50:00Z"),     // 10 min: lapsed
		node("garbled", "v1;eth0=::/0 <script>", "True", ""), // never votes
	} {
		v, err := View(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	got, wake := r.Reports(now)
	var names []string
	for _, rep := range got {
		names = append(names, rep.Node)
	}
	if want := []string{"flaky", "fresh", "ready"}; !slices.Equal(names, want) {
		t.Errorf("voting nodes = %v, want %v", names, want)
	}
	if want := time.Date(2026, 11, 21, 12, 3, 0, 0, time.UTC); !wake.Equal(want) {
		t.Errorf("wake = %v, want %v (when flaky's vote lapses)", wake, want)
	}
	if ev.n != 1 {
		t.Errorf("%d events, want 1 (the garbled digest)", ev.n)
	}
	// Three minutes later flaky lapses too; the garbled digest is not reported again.
	got, wake = r.Reports(now.Add(3 * time.Minute))
	if len(got) != 2 || !wake.IsZero() || ev.n != 1 {
		t.Errorf("later: %d voting, wake %v, %d events; want 2, none, 1", len(got), wake, ev.n)
	}
	if !r.isLapsed("down") || !r.isLapsed("flaky") || r.isLapsed("ready") {
		t.Errorf("lapsed = %v", r.lapsed)
	}
	// down is Ready again: it votes, and is no longer counted as lapsed.
	v, _ := View(node("down", a, "True", "2026-11-21T12:04:00Z"))
	if err := store.Update(v); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Reports(now.Add(4 * time.Minute)); len(got) != 3 || r.isLapsed("down") {
		t.Errorf("down back: %d voting, lapsed %v; want 3 and false", len(got), r.isLapsed("down"))
	}
	// A deleted Node is forgotten: nothing of it is kept.
	if err := store.Delete(v); err != nil {
		t.Fatal(err)
	}
	got, _ = r.Reports(now.Add(4 * time.Minute))
	if _, kept := r.decoded["down"]; len(got) != 2 || kept {
		t.Errorf("down deleted: %d voting, its digest kept %v; want 2 and false", len(got), kept)
	}
	// With the rule off every digest votes.
	r.grace = 0
	if got, _ := r.Reports(now); len(got) != 3 {
		t.Errorf("rule off: %d voting, want 3", len(got))
	}
}

// Anyone who may patch a Node can write up to 256 KiB into its digest
// annotation: the cache keeps at most one byte more than a digest may hold,
// and the digest is still reported garbled.
func TestTheCacheKeepsNoHugeDigest(t *testing.T) {
	huge := "v1;eth0=" + strings.Repeat("x", 256<<10)
	for name, o := range map[string]any{
		"a Node":       node("n1", huge, corev1.ConditionTrue, "2026-01-01T00:00:00Z"),
		"its metadata": &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{digest.Annotation: huge}}},
	} {
		v, err := View(o)
		if err != nil {
			t.Fatal(err)
		}
		kept := v.(*metav1.PartialObjectMetadata).Annotations[digest.Annotation]
		if len(kept) != digest.MaxBytes+1 {
			t.Errorf("%s: the cache keeps %d bytes, want %d", name, len(kept), digest.MaxBytes+1)
		}
		if _, err := digest.Decode(kept); err == nil {
			t.Errorf("%s: the kept value decodes", name)
		}
	}
	slim := Slim(node("n1", huge, corev1.ConditionTrue, "2026-01-01T00:00:00Z"))
	if got := len(slim.Annotations[digest.Annotation]); got != digest.MaxBytes+1 {
		t.Errorf("Slim keeps %d bytes", got)
	}
}
