package permit

import (
	"testing"
	"time"
)

// An object that is gone leaves nothing behind: its memo entry, its bucket,
// its free-write mark (its dry runs' too) and its episode are swept, and
// the objects still there keep theirs - a throttled one stays throttled.
func TestASweepForgetsOnlyTheObjectsThatAreGone(t *testing.T) {
	now := time.Unix(0, 0)
	l := Limits{ObjectBurst: 1, ObjectPerMinute: 1, TotalBurst: 100, TotalPerMinute: 100, DecisionBurst: 1, DecisionsPerMinute: 1, EventBurst: 1, EventsPerMinute: 1}
	g := &Gate{Breaker: NewBreaker(l)}
	gone := Object{Resource: "services", Namespace: "tenant", Name: "churn-1"}
	kept := Object{Resource: "services", Namespace: "default", Name: "web"}
	status := Object{Resource: "dynamicprefixes", Name: "home"}
	var m Memo[string]
	g.Breaker.Decide("home", "d1", now)
	for _, o := range []Object{gone, kept, status} {
		m.Put(o, "1", "written")
		for range FreeWrites {
			g.Breaker.Take(o.String(), "home", now) // free: the decision's first writes
		}
		g.Breaker.Take(o.String(), "home", now) // the bucket's one permit
		g.Breaker.Take(o.String(), "home", now) // refused: an episode
		g.Breaker.budget.TakeFor(o.String()+dryRun, "home", now)
	}
	present := func(o Object) bool { return o != gone }
	m.Sweep(present)
	g.Sweep(present)

	if _, ok := m.Get(gone, "1"); ok {
		t.Error("the memo of a deleted object outlived the sweep")
	}
	if _, ok := m.Get(kept, "1"); !ok {
		t.Error("the sweep dropped the memo of an object still there")
	}
	b := g.Breaker.budget
	for _, key := range []string{gone.String(), gone.String() + dryRun} {
		if _, ok := b.objects[key]; ok {
			t.Errorf("%q: the bucket of a deleted object outlived the sweep", key)
		}
		if _, ok := b.wrote[key]; ok {
			t.Errorf("%q: the free-write mark of a deleted object outlived the sweep", key)
		}
	}
	if g.Breaker.on[gone.String()] {
		t.Error("the episode of a deleted object outlived the sweep")
	}
	for _, o := range []Object{kept, status} {
		if !g.Breaker.on[o.String()] {
			t.Errorf("%s: the sweep ended the episode of an object still there", o)
		}
		if p := g.Breaker.Take(o.String(), "home", now); p.OK {
			t.Errorf("%s: the sweep refilled the bucket of an object still there", o)
		}
	}
}

func TestObjectOfReadsBackEveryBudgetKey(t *testing.T) {
	for _, o := range []Object{
		{Resource: "services", Namespace: "default", Name: "web"},
		{Resource: "dynamicprefixes", Name: "home"},
		{Resource: "gateways", Namespace: "tenant", Name: "gw"},
	} {
		for _, key := range []string{o.String(), o.String() + dryRun} {
			if got, ok := objectOf(key); !ok || got != o {
				t.Errorf("objectOf(%q) = %+v, %v, want %+v", key, got, ok, o)
			}
		}
	}
	if _, ok := objectOf("total"); ok {
		t.Error(`objectOf("total"): a key no Object makes read as one`)
	}
}
