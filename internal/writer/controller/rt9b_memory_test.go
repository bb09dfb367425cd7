package controller

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/permit"
)

// Red team r9b: what the writer keeps of an object it wrote - the memo of
// its last write (Writer.services: what the Service's annotations read
// back as, the user's entries beside ours) and the write budget's per
// object state (Budget.wrote, the free write's mark; Budget.objects, a
// bucket) - is dropped only when the same object is read again at another
// version (Memo.Get), and never when the object is deleted: Budget.Forget
// ("the object was deleted") has no caller. A tenant - a Role over
// Services in its own namespace - creates Services following home under
// fresh names, each with 60 user entries of its own beside renumber's
// (within every bound: 16 KiB, 64 entries), lets the writer give each its
// address (a new object's first write under the admitted decision is free
// of the budget), and deletes them. Nothing of those Services exists any
// more, yet the writer's heap grows with every one it ever wrote: the
// caches are bounded by what follows now (docs/security.md, "one
// tenant": "what it caches of a followed object is bounded by what it
// follows"), the writer's memory by nothing. Wanted: churning Services
// that are gone leaves the writer's memory where it was.
func TestRT9BTheWriterForgetsTheServicesATenantDeleted(t *testing.T) {
	var shipped permit.Limits // the writer's flags' defaults
	fs := flag.NewFlagSet("writer", flag.ContinueOnError)
	shipped.Flags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	f := converged(t, shipped)
	creator := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").(interface {
		CreateFake(*metav1.PartialObjectMetadata, metav1.CreateOptions, ...string) (*metav1.PartialObjectMetadata, error)
	})
	var pad []string
	for i := range 60 {
		pad = append(pad, fmt.Sprintf("2001:db8:eeee:eeee:eeee:eeee:eeee:%x", i+1))
	}
	const perRound = 400
	next := 0
	round := func() {
		t.Helper()
		var names []string
		for i := range perRound {
			name := fmt.Sprintf("churn-%d", next)
			next++
			names = append(names, name)
			s := &metav1.PartialObjectMetadata{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, ResourceVersion: "1",
					CreationTimestamp: metav1.NewTime(f.clock.Now()),
					Annotations: map[string]string{
						dynamicprefix.AnnotationName: "home",
						holdings.AnnotationSuffix:    fmt.Sprintf("::ffff:0:1:%x", i+1),
						holdings.AnnotationIPs:       strings.Join(pad, ","),
					}},
			}
			if _, err := creator.CreateFake(s, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		f.catchUp()
		if got := f.settle(passHome); len(got) < perRound {
			t.Fatalf("the pass over %d new Services wrote %d objects", perRound, len(got))
		}
		for _, name := range names {
			if err := f.meta.Resource(holdings.ServiceGVR).Namespace("tenant").Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			delete(f.seen, "services/"+name) // the fixture's own memory of them
		}
		f.catchUp()
		f.clock.Step(time.Minute)
		if got := f.settle(passHome); len(got) != 0 {
			t.Logf("the pass after the deletions wrote %q", got)
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	round() // warm up: the fixture's and the caches' own allocations
	const rounds = 5
	for range rounds {
		round()
	}
	churned := heap()
	runtime.KeepAlive(f.ctl)
	// The same fixture (caches, clients, what the API holds) under a new
	// writer: what the heap sheds is what the old one kept.
	f.ctl = NewController(f.ctl.cfg, f, f.votes, f.dyn, f.meta, f.clock, slog.New(slog.NewTextHandler(io.Discard, nil)), f.events)
	fresh := heap()
	kept := int64(churned) - int64(fresh)
	n := int64((rounds + 1) * perRound)
	t.Logf("heap %d KiB after %d Services created, written and deleted; %d KiB under a new writer: the old one kept %d KiB (%d bytes a Service)",
		churned>>10, n, fresh>>10, kept>>10, kept/n)
	if limit := int64(1 << 20); kept > limit {
		t.Errorf("the writer keeps %d KiB for %d Services that no longer exist (%d bytes each), want under %d KiB: what it wrote to a deleted object stays in its memos and write budget for ever",
			kept>>10, n, kept/n, limit>>10)
	}
}
