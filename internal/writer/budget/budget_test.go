package budget

import (
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

func TestObjectBudget(t *testing.T) {
	b := New(Limits{ObjectBurst: 3, ObjectPerMinute: 6, TotalBurst: 100, TotalPerMinute: 600})
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
	b := New(Limits{ObjectBurst: 10, ObjectPerMinute: 60, TotalBurst: 2, TotalPerMinute: 60})
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
	b := New(Limits{ObjectBurst: 2, ObjectPerMinute: 6, TotalBurst: 10, TotalPerMinute: 60})
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
