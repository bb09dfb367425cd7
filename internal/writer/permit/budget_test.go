package permit

import (
	"fmt"
	"slices"
	"testing"
	"time"
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

// Ten renumberings in ten seconds: each new decision's one write per object
// passes, while the object's bucket (burst 2) alone would have refused the
// third.
func TestEachObjectsFirstWriteUnderANewDecisionIsFree(t *testing.T) {
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
	// The object buckets are untouched: a fight now still gets the burst.
	if ok, _, free := b.TakeFor("pool/lb", "home", t0.Add(10*time.Second)); !ok || free {
		t.Errorf("a second write under one decision: ok=%v free=%v, want ok from the bucket", ok, free)
	}
}

// A fight: the same decision, the same object rewritten. Exactly as strong
// as without decisions: one free write, then burst + rate x time.
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
	if free != 1 || allowed != 1+2+1 {
		t.Errorf("a minute-long fight under one decision: %d writes (%d free), want 1 free + burst 2 + 2/min", allowed, free)
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
