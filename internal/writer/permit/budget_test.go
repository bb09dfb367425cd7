package permit

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var t0 = time.Unix(1_000_000, 0)

func TestObjectBudget(t *testing.T) {
	b := NewBudget(Limits{ObjectBurst: 3, ObjectPerMinute: 6, TotalBurst: 100, TotalPerMinute: 600})
	for i := range 3 {
		if ok, _ := b.Take("pool/lb", t0); !ok {
			t.Fatalf("write %d of the burst refused", i+1)
		}
	}
	ok, wait := b.Take("pool/lb", t0)
	if ok || wait != 10*time.Second {
		t.Fatalf("4th write: ok=%v wait=%v, want refused for 10 s", ok, wait)
	}
	if ok, _ := b.Take("pool/other", t0); !ok {
		t.Error("one object's storm blocked another object")
	}
	if ok, _ := b.Take("pool/lb", t0.Add(10*time.Second)); !ok {
		t.Error("no permit after the refill time")
	}
	// A fight over a minute costs burst + rate x time, not one write per revert.
	allowed := 0
	for s := range 60 {
		if ok, _ := b.Take("pool/fight", t0.Add(time.Duration(s)*time.Second)); ok {
			allowed++
		}
	}
	if allowed != 3+5 {
		t.Errorf("%d writes in a minute-long fight, want 8 (burst 3 + 6/min)", allowed)
	}
}

func TestTotalBudget(t *testing.T) {
	b := NewBudget(Limits{ObjectBurst: 10, ObjectPerMinute: 60, TotalBurst: 2, TotalPerMinute: 60})
	b.Take("a", t0)
	b.Take("b", t0)
	if ok, wait := b.Take("c", t0); ok || wait != time.Second {
		t.Errorf("third object: ok=%v wait=%v, want refused by the total budget for 1 s", ok, wait)
	}
	// A refusal by the total budget does not spend the object's permit.
	if ok, _ := b.Take("c", t0.Add(time.Second)); !ok {
		t.Error("refused after the total refilled")
	}
}

func TestValidate(t *testing.T) {
	if err := (Limits{ObjectBurst: 0, ObjectPerMinute: 1, TotalBurst: 1, TotalPerMinute: 1}).Validate(); err == nil {
		t.Error("zero burst accepted")
	}
}

func TestCalm(t *testing.T) {
	b := NewBudget(Limits{ObjectBurst: 2, ObjectPerMinute: 6, TotalBurst: 10, TotalPerMinute: 60})
	if calm, _ := b.Calm("x", t0); !calm {
		t.Error("an untouched object is not calm")
	}
	b.Take("x", t0)
	b.Take("x", t0)
	if calm, in := b.Calm("x", t0); calm || in != 20*time.Second {
		t.Errorf("Calm = %v, %v; want false, 20s until the bucket is full", calm, in)
	}
	if calm, _ := b.Calm("x", t0.Add(20*time.Second)); !calm {
		t.Error("not calm once the bucket refilled")
	}
}

var decisive = Limits{ObjectBurst: 2, ObjectPerMinute: 2, TotalBurst: 100, TotalPerMinute: 60, DecisionBurst: 3, DecisionsPerMinute: 2}

// Ten renumberings in ten seconds: each new decision's first write per
// object passes, while the object's bucket (burst 2) alone would have
// refused the third.
func TestEachObjectsFirstWritesUnderANewDecisionAreFree(t *testing.T) {
	b := NewBudget(Limits{ObjectBurst: 2, ObjectPerMinute: 2, TotalBurst: 100, TotalPerMinute: 60, DecisionBurst: 20, DecisionsPerMinute: 10})
	for i := range 10 {
		now := t0.Add(time.Duration(i) * time.Second)
		if admitted, refused := b.Decide("home", fmt.Sprint("1 [prefix ", i, "]"), now); !admitted || refused {
			t.Fatalf("decision %d not admitted", i)
		}
		for _, obj := range []string{"pool/lb", "services/web"} {
			if ok, _, free := b.TakeFor(obj, "home", now); !ok || !free {
				t.Errorf("renumbering %d: %s refused (ok=%v free=%v)", i, obj, ok, free)
			}
		}
	}
	// The object buckets are untouched: a fight, past the decision's free
	// writes, still gets the burst.
	for range FreeWrites - 1 {
		b.TakeFor("pool/lb", "home", t0.Add(10*time.Second))
	}
	if ok, _, free := b.TakeFor("pool/lb", "home", t0.Add(10*time.Second)); !ok || free {
		t.Errorf("write %d under one decision: ok=%v free=%v, want ok from the bucket", FreeWrites+1, ok, free)
	}
}

// A fight: the same decision, the same object rewritten. Exactly as strong
// as without decisions once the renumbering's FreeWrites are spent: burst +
// rate x time.
func TestASecondWriteUnderTheSameDecisionIsAStorm(t *testing.T) {
	b := NewBudget(decisive)
	b.Decide("home", "1 [a]", t0)
	allowed, free := 0, 0
	for s := range 60 {
		ok, _, f := b.TakeFor("pool/fight", "home", t0.Add(time.Duration(s)*time.Second))
		if ok {
			allowed++
		}
		if f {
			free++
		}
	}
	if free != FreeWrites || allowed != FreeWrites+2+1 {
		t.Errorf("a minute-long fight under one decision: %d writes (%d free), want %d free + burst 2 + 2/min", allowed, free, FreeWrites)
	}
}

// A renumbering's free writes are bounded per object and decision: the
// first FreeWrites writes to each object under a new admitted decision, as
// many for each object, and as many again under the next decision - never
// more, however many writes are asked for.
func TestFreeWritesPerObjectAndDecisionAreBounded(t *testing.T) {
	b := NewBudget(Limits{ObjectBurst: 1, ObjectPerMinute: 1, TotalBurst: 1, TotalPerMinute: 1, DecisionBurst: 2, DecisionsPerMinute: 1})
	for _, decision := range []string{"1 [a]", "1 [b a]"} {
		b.Decide("home", decision, t0)
		for _, obj := range []string{"services/default/web", "pool/lb"} {
			free := 0
			for range 2 * FreeWrites {
				if _, _, f := b.TakeFor(obj, "home", t0); f {
					free++
				}
			}
			if free != FreeWrites {
				t.Errorf("decision %q: %d free writes to %s, want %d", decision, free, obj, FreeWrites)
			}
		}
	}
	// The decision budget spent (burst 2), a third decision frees none.
	b.Decide("home", "1 [c b]", t0)
	if _, _, f := b.TakeFor("pool/lb", "home", t0); f {
		t.Error("a decision over the decision budget made a write free")
	}
}

// A free write the API server refused (a conflict: the object is unchanged)
// is given back: the renumbering's retry is free too, not drawn from the
// buckets (red team r10b F1b). What is given back is bounded (FreeWrites
// per object and decision), and a permit from the buckets gives nothing
// back: a fight's refused writes count.
func TestARefusedWriteGivesItsFreeWriteBack(t *testing.T) {
	b := NewBudget(Limits{ObjectBurst: 1, ObjectPerMinute: 1, TotalBurst: 1, TotalPerMinute: 1, DecisionBurst: 1, DecisionsPerMinute: 1})
	b.Decide("home", "1 [b a]", t0)
	requests := 0
	for {
		ok, _, free := b.TakeFor("services/default/web", "home", t0)
		if !free {
			if !ok {
				t.Fatal("the buckets refused their first write")
			}
			break
		}
		requests++
		b.Refund("services/default/web") // every request refused
	}
	if requests != 2*FreeWrites {
		t.Errorf("%d free requests, each refused, before the buckets; want %d (FreeWrites, and as many given back)", requests, 2*FreeWrites)
	}
	// The bucket's permit (just taken) is not given back.
	b.Refund("services/default/web")
	if ok, _, free := b.TakeFor("services/default/web", "home", t0); ok || free {
		t.Errorf("after a refused write from the buckets: ok=%v free=%v, want refused (the bucket's burst 1 is spent)", ok, free)
	}
	// A refund gives back only the last permit, once.
	b.Decide("home", "1 [c b]", t0.Add(time.Hour))
	b.TakeFor("pool/lb", "home", t0.Add(time.Hour))
	b.Refund("pool/lb")
	b.Refund("pool/lb")
	free := 0
	for range 2 * FreeWrites {
		if _, _, f := b.TakeFor("pool/lb", "home", t0.Add(time.Hour)); f {
			free++
		}
	}
	if free != FreeWrites {
		t.Errorf("after one refused write refunded twice: %d free writes, want %d", free, FreeWrites)
	}
}

// A tenant fighting its own objects spends the buckets - the total too -
// once each object's free writes are spent; another object's renumbering
// still has all of its own (red team r10b F1).
func TestAFightMeetsTheBucketsAfterItsFreeWritesAndSpendsNoOtherObjects(t *testing.T) {
	b := NewBudget(Limits{ObjectBurst: 5, ObjectPerMinute: 2, TotalBurst: 10, TotalPerMinute: 60, DecisionBurst: 20, DecisionsPerMinute: 10})
	b.Decide("home", "1 [b a]", t0)
	bucketed := 0
	for i := range 40 {
		tenant := fmt.Sprint("services/tenant/s", i)
		for w := range FreeWrites + 5 {
			ok, _, free := b.TakeFor(tenant, "home", t0)
			if free != (w < FreeWrites) {
				t.Fatalf("%s write %d: free=%v", tenant, w+1, free)
			}
			if ok && !free {
				bucketed++
			}
		}
	}
	if bucketed != 10 {
		t.Errorf("the fight took %d writes from the buckets at once, want the total's burst 10", bucketed)
	}
	// What the renumbering writes to web, the total spent by the fight.
	for _, write := range []string{"its address on B", "its DNS target, once its load balancer publishes B", "a write made again (LB-IPAM wrote web meanwhile)"} {
		if ok, _, free := b.TakeFor("services/default/web", "home", t0); !ok || !free {
			t.Errorf("web's write (%s): ok=%v free=%v, want free", write, ok, free)
		}
	}
	if ok, _, _ := b.TakeFor("services/default/web", "home", t0); ok {
		t.Error("web's write past its free writes passed with the total spent")
	}
}

// Decisions are budgeted too: a flapping router (a new decision every
// second) gets DecisionBurst free rounds, then DecisionsPerMinute; the rest
// fall back to the buckets, and say so.
func TestNewDecisionsBeyondTheirBudgetFallBackToTheBuckets(t *testing.T) {
	b := NewBudget(decisive)
	admitted, refused := 0, 0
	for s := range 60 {
		a, r := b.Decide("home", fmt.Sprint("1 [flap ", s, "]"), t0.Add(time.Duration(s)*time.Second))
		if a {
			admitted++
		}
		if r {
			refused++
		}
	}
	if admitted != 3+1 { // burst 3, then one at 30 s
		t.Errorf("%d decisions admitted in a minute of flapping, want burst 3 + 2/min", admitted)
	}
	if refused != 60-admitted {
		t.Errorf("%d refused, want %d", refused, 60-admitted)
	}
	// Another DynamicPrefix has its own decisions.
	if a, _ := b.Decide("office", "1 [x]", t0.Add(time.Minute)); !a {
		t.Error("one DynamicPrefix's flapping spent another's decisions")
	}
	// The same decision again is no new decision.
	if _, r := b.Decide("office", "1 [x]", t0.Add(time.Minute)); r {
		t.Error("the same decision counted again")
	}
}

func TestWithoutADecisionBudgetEveryWriteCounts(t *testing.T) {
	b := NewBudget(Limits{ObjectBurst: 1, ObjectPerMinute: 1, TotalBurst: 100, TotalPerMinute: 60})
	if a, r := b.Decide("home", "1 [a]", t0); a || r {
		t.Errorf("admitted=%v refused=%v with no decision budget", a, r)
	}
	b.TakeFor("pool/lb", "home", t0)
	if ok, _, _ := b.TakeFor("pool/lb", "home", t0); ok {
		t.Error("the second write passed: the decision budget is off")
	}
}

// Events past their budget are dropped, the first drop of each run is said
// once, and recording resumes as the bucket refills.
func TestEventsHaveABudget(t *testing.T) {
	b := NewEventBudget(Limits{EventBurst: 2, EventsPerMinute: 1})
	type take struct{ ok, started bool }
	var got []take
	for _, at := range []time.Duration{0, 0, 0, time.Second, time.Minute, time.Minute} {
		ok, started := b.Take(t0.Add(at))
		got = append(got, take{ok, started})
	}
	want := []take{{true, false}, {true, false}, {false, true}, {false, false}, {true, false}, {false, true}}
	if !slices.Equal(got, want) {
		t.Errorf("takes %v, want %v", got, want)
	}
	if err := (Limits{ObjectBurst: 1, ObjectPerMinute: 1, TotalBurst: 1, TotalPerMinute: 1, EventBurst: 0, EventsPerMinute: 1}).Validate(); err == nil {
		t.Error("an event burst of 0 validates")
	}
}

// What the API server refused changed nothing, and gives its free write
// back (Gate.Unwritten); a write that may have been made (a timeout, a 5xx,
// a lost connection) spends it.
func TestOnlyAWriteTheServerRefusedGivesItsFreeWriteBack(t *testing.T) {
	web := schema.GroupResource{Resource: "services"}
	conflict := apierrors.NewConflict(web, "web", errors.New("the object has been modified"))
	for _, tc := range []struct {
		name string
		err  error
		back bool
	}{
		{"a conflict", conflict, true},
		{"a conflict, wrapped", fmt.Errorf("patching Service default/web: %w", conflict), true},
		{"an admission refusal", apierrors.NewForbidden(web, "web", errors.New("the writer may not change")), true},
		{"a timeout", apierrors.NewTimeoutError("the request timed out", 1), false},
		{"an internal error", apierrors.NewInternalError(errors.New("etcd")), false},
		{"a lost connection", errors.New("connection reset by peer"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Gate{Breaker: NewBreaker(decisive)}
			o := Object{Resource: "services", Namespace: "default", Name: "web"}
			g.Breaker.Decide("home", "1 [b a]", t0)
			for range FreeWrites {
				g.Breaker.Take(o.String(), "home", t0)
			}
			g.Unwritten(o, tc.err)
			if _, _, free := g.Breaker.budget.TakeFor(o.String(), "home", t0); free != tc.back {
				t.Errorf("after the last free write failed with %v: the next is free=%v, want %v", tc.err, free, tc.back)
			}
		})
	}
}
