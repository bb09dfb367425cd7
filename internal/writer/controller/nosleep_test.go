package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/permit"
)

// A pass never sleeps: waiting for the cache to show the writer's own write,
// or for the API server to admit a dry run, is an outcome (permit.Later) that
// the queue turns into a requeue on the controller's clock.

// A pass whose cache has not shown the writer's own last status write makes
// no write: what it would write is made against a version that is gone (the
// API server's 409, which TestQuietRouter met on a loaded machine). It looks
// again later; the pass after the cache shows the write makes it.
func TestAPassWhoseCacheHasNotSeenItsOwnStatusWriteWritesNothing(t *testing.T) {
	f := converged(t, generous)
	f.votes.reports = nil
	for i := range 3 { // the router goes quiet
		f.votes.reports = append(f.votes.reports, decide.Report{Node: fmt.Sprintf("node-%d", i),
			Digest: digest.Node{Links: []digest.Link{{Name: "eth0"}}}})
	}
	want := []string{"patch dynamicprefixes/status home"}
	if got, o := f.pass(); !slices.Equal(got, want) || o.After != 0 {
		t.Fatalf("quiet router: wrote %q, looks again after %s; want %q", got, o.After, want)
	}
	f.report(3, prefixA) // and speaks again, before the cache shows the write
	if got, o := f.pass(); len(got) != 0 || o.After == 0 {
		t.Fatalf("before the cache showed the status write: wrote %q, looks again after %s; want nothing, and a look again", got, o.After)
	}
	f.catchUp()
	if got, o := f.pass(); !slices.Equal(got, want) || o.After != 0 {
		t.Errorf("once the cache showed it: wrote %q, looks again after %s; want %q", got, o.After, want)
	}
}

// A pass never waits in place: with admission refusing every dry run and a
// clock that never moves, each pass returns at once, having asked once and
// written nothing, and says when to look again. Once the clock passes the
// bound (Config.StatusSeen), the objects are written without asking.
func TestAPassNeverWaitsForAdmission(t *testing.T) {
	f := converged(t, generous)
	dryRuns := f.admitting(generous, 10*time.Minute, -1)
	f.report(3, prefixB, prefixA)
	if got, o := f.pass(); !slices.Equal(got, []string{"patch dynamicprefixes/status home"}) || o.After == 0 {
		t.Fatalf("the pass naming B wrote %q and looks again after %s; want the status alone, and a look again", got, o.After)
	}
	f.catchUp()
	for i := range 5 {
		if got, o := f.pass(); len(got) != 0 || o.After == 0 || dryRuns.Load() != int32(i+1) {
			t.Fatalf("pass %d wrote %q, looks again after %s, %d dry runs in all; want nothing, a look again, one dry run per pass",
				i+2, got, o.After, dryRuns.Load())
		}
	}
	f.clock.Step(10 * time.Minute)
	want := []string{"patch ciliumloadbalancerippools lb", "patch services web"}
	if got, o := f.pass(); !slices.Equal(got, want) || o.After != 0 || dryRuns.Load() != 5 {
		t.Errorf("past the bound: wrote %q, looks again after %s, %d dry runs; want %q without asking", got, o.After, dryRuns.Load(), want)
	}
}

// A dry run is a request like any write: it takes a permit from the breaker,
// from a bucket of its own. Past its budget the pass stops asking and
// writes; the write's own permit was never spent on asking.
func TestADryRunTakesAPermit(t *testing.T) {
	tight := permit.Limits{ObjectBurst: 2, ObjectPerMinute: 0.001, TotalBurst: 100, TotalPerMinute: 100}
	f := converged(t, tight)
	dryRuns := f.admitting(tight, time.Hour, -1)
	counted := permit.DryRuns()
	f.report(3, prefixB, prefixA)
	if got, _ := f.pass(); !slices.Equal(got, []string{"patch dynamicprefixes/status home"}) {
		t.Fatalf("the pass naming B wrote %q", got)
	}
	for range 2 {
		f.catchUp()
		if got, o := f.pass(); len(got) != 0 || o.After == 0 {
			t.Fatalf("asking: wrote %q, looks again after %s", got, o.After)
		}
	}
	f.catchUp()
	want := []string{"patch ciliumloadbalancerippools lb", "patch services web"}
	if got, o := f.pass(); !slices.Equal(got, want) || o.After != 0 {
		t.Errorf("the dry runs' budget spent: wrote %q, looks again after %s; want %q", got, o.After, want)
	}
	if dryRuns.Load() != 2 || permit.DryRuns()-counted != 2 {
		t.Errorf("%d dry runs sent, %d counted; want the bucket's 2", dryRuns.Load(), permit.DryRuns()-counted)
	}
}

// The pass that waits for the cache to show its own status write is queued
// by the watch event that shows it (a status-only update, which queues
// nothing otherwise), not by the fallback a second later: a renumbering
// waited that second in make bench (the digest to the first pool patch went
// from 149 ms to 1.36 s at the p50).
func TestTheWatchEventOfItsOwnStatusWriteQueuesTheWaitingPass(t *testing.T) {
	f := converged(t, generous)
	f.ctl.DynamicPrefixStatusChanged("home")
	if n := f.ctl.queue.Len(); n != 0 {
		t.Fatalf("a status event while no pass waits queued %d keys, want none", n)
	}
	f.admitting(generous, 10*time.Minute, 0)
	f.report(3, prefixB, prefixA)
	if got, o := f.pass(); !slices.Equal(got, []string{"patch dynamicprefixes/status home"}) || o.After == 0 {
		t.Fatalf("the pass naming B wrote %q and looks again after %s; want the status alone, and a look again", got, o.After)
	}
	f.ctl.DynamicPrefixStatusChanged("home")
	if n := f.ctl.queue.Len(); n != 1 {
		t.Fatalf("the status event of the write the pass waits for queued %d keys, want 1", n)
	}
	key, _ := f.ctl.queue.Get()
	f.ctl.queue.Done(key)
	f.ctl.DynamicPrefixStatusChanged("home")
	if n := f.ctl.queue.Len(); n != 0 {
		t.Errorf("a second status event queued %d keys: only the awaited one queues", n)
	}
}

// The watch event of the write can come before the pass marks itself
// waiting: the cache then shows the write already, and the next pass is
// queued at once rather than by the fallback.
func TestAPassWhoseCacheShowsItsWriteAlreadyIsQueuedAtOnce(t *testing.T) {
	f := converged(t, generous)
	f.admitting(generous, 10*time.Minute, 0)
	f.report(3, prefixB, prefixA)
	if got, o := f.pass(); !slices.Equal(got, []string{"patch dynamicprefixes/status home"}) || o.After == 0 {
		t.Fatalf("the pass naming B wrote %q and looks again after %s; want the status alone, and a look again", got, o.After)
	}
	f.catchUp() // the event came and went before the pass marked itself
	f.ctl.awaitStatus("home")
	if n := f.ctl.queue.Len(); n != 1 {
		t.Errorf("queued %d keys, want the next pass at once", n)
	}
}
