package permit

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
)

// notes records each event's reason and note.
type notes struct{ got []string }

func (n *notes) Event(_ *unstructured.Unstructured, _ bool, reason, note string) bool {
	n.got = append(n.got, reason+note)
	return true
}

// FuzzAnnouncingIsBoundedAndRepeatsOnlyPastTheBound plays passes that each
// announce a set of subjects (any set, any order, each with one of two
// texts; some forgotten between), hours apart or minutes, against Events
// with room for b subjects. After every announcement:
//   - the memory holds at most b subjects;
//   - an announcement whose text differs from the last one emitted for its
//     subject (or its first, or the first since it was forgotten) is
//     emitted: nothing that changed goes unsaid;
//   - a pass that repeats the pass before it (the same subjects and texts,
//     within staleAfter) emits exactly max(0, |S| - b) events, once the
//     memory held nothing still announced outside S (an hour passed before
//     the first of them): the least any memory of b subjects can emit,
//     since what it does not hold may have changed.
func FuzzAnnouncingIsBoundedAndRepeatsOnlyPastTheBound(f *testing.F) {
	// A seed is the room b (1 + first%8), then episodes of eight bytes:
	// the set (a bit per subject of 24), its texts, which subjects
	// outside it are forgotten first (a bit each), how many passes.
	f.Add([]byte{3, 0x1f, 0, 0, 0, 0, 0, 0, 3})
	f.Add([]byte{0, 0x03, 0, 0, 0, 0, 0, 0, 3, 0x06, 0, 0, 1, 1, 0, 0, 2})
	f.Add([]byte{7, 0xff, 0xff, 0xff, 0xaa, 0, 0, 0, 3, 0x0f, 0, 0, 0x55, 0xf0, 0xff, 0xff, 2})
	f.Add([]byte{5, 0xff, 0x0f, 0, 0x0f, 0, 0, 0, 3, 0xf0, 0xff, 0, 0x0f, 0x0f, 0, 0xff, 3, 0xff, 0xff, 0xff, 0, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		const universe = 24
		b := 1 + int(next()%8)
		clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
		rec := &notes{}
		e := Events{Recorder: rec, Clock: clk, max: b}
		u := &unstructured.Unstructured{}
		emitted := map[string]string{} // the last text emitted for each subject, since forgotten
		rng := rand.New(rand.NewPCG(uint64(len(data)), uint64(b)))
		for range 64 { // episodes, while data lasts
			if len(data) == 0 {
				break
			}
			// An episode: a set S of the universe, one text each, passes
			// over it after an hour (everything outside S stale).
			set := uint32(next()) | uint32(next())<<8 | uint32(next())<<16
			texts := next()
			var subjects []string
			text := map[string]string{}
			for i := range universe {
				if set&(1<<i) != 0 {
					s := fmt.Sprintf("svc/services/tenant/s%d", i)
					subjects = append(subjects, s)
					text[s] = fmt.Sprintf("text %d", (texts>>(i%8))&1)
				}
			}
			forget := uint32(next()) | uint32(next())<<8 | uint32(next())<<16
			for i := range universe {
				if s := fmt.Sprintf("svc/services/tenant/s%d", i); forget&^set&(1<<i) != 0 {
					e.Forget(s)
					delete(emitted, s)
				}
			}
			clk.SetTime(clk.Now().Add(staleAfter))
			passes := 1 + int(next()%4)
			for p := range passes {
				rng.Shuffle(len(subjects), func(i, j int) { subjects[i], subjects[j] = subjects[j], subjects[i] })
				before := len(rec.got)
				for _, s := range subjects {
					n := len(rec.got)
					e.Announce(s, u, true, "Reason", text[s])
					if emitted[s] != "Reason"+text[s] && len(rec.got) == n {
						t.Fatalf("%s announced %q (last emitted %q): not emitted", s, text[s], emitted[s])
					}
					if len(rec.got) > n {
						emitted[s] = "Reason" + text[s]
					}
					if got := e.remembered(); got > b {
						t.Fatalf("%d subjects remembered, want at most %d", got, b)
					}
				}
				if want := max(0, len(subjects)-b); p > 0 && len(rec.got)-before != want {
					t.Fatalf("pass %d over the same %d subjects (room for %d) emitted %d events, want %d", p+1, len(subjects), b, len(rec.got)-before, want)
				}
				clk.SetTime(clk.Now().Add(staleAfter / time.Duration(passes+1)))
			}
		}
	})
}

// The worst order for a memory that forgets the least recently announced:
// B+1 subjects announced in one order, pass after pass. Each unchanged pass
// announces exactly the one subject past the bound again; the first B are
// never repeated.
func TestAFixedOrderPastTheBoundRepeatsOneSubject(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	rec := &notes{}
	e := Events{Recorder: rec, Clock: clk, max: 4}
	u := &unstructured.Unstructured{}
	for pass := range 5 {
		before := len(rec.got)
		for i := range 5 {
			e.Announce(fmt.Sprintf("s%d", i), u, true, "Reason", fmt.Sprintf("s%d", i))
		}
		want := []string{"Reasons4"}
		if pass == 0 {
			want = []string{"Reasons0", "Reasons1", "Reasons2", "Reasons3", "Reasons4"}
		}
		if got := rec.got[before:]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("pass %d emitted %q, want %q", pass+1, got, want)
		}
		clk.SetTime(clk.Now().Add(time.Minute))
	}
	// An hour on, s0 is announced no more (its Service deleted): s4 takes
	// its place, and s0 would be announced again.
	clk.SetTime(clk.Now().Add(staleAfter))
	before := len(rec.got)
	for range 2 {
		for i := 1; i < 5; i++ {
			e.Announce(fmt.Sprintf("s%d", i), u, true, "Reason", fmt.Sprintf("s%d", i))
		}
	}
	if got := rec.got[before:]; fmt.Sprint(got) != "[Reasons4]" {
		t.Errorf("two passes over s1-s4 an hour later emitted %q, want s4 once (s0 gave way)", got)
	}
}

// A tenant's Services past the bound, announced every pass before a
// DynamicPrefix's own problem begins, do not crowd it out: its warning is
// announced once, not once a pass.
func TestServicesPastTheBoundDoNotCrowdOutADynamicPrefixsWarning(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	rec := &notes{}
	e := Events{Recorder: rec, Clock: clk, max: 4}
	u := &unstructured.Unstructured{}
	var conflicts int
	for pass := range 4 {
		for i := range 6 {
			e.Announce(fmt.Sprintf("svc/services/tenant/s%d", i), u, true, "InvalidServiceAnnotations", fmt.Sprintf("s%d", i))
		}
		if pass > 0 {
			n := len(rec.got)
			e.Announce(OwnSubjects+"home/conflict", u, true, "RouterConflict", "two routers disagree")
			conflicts += len(rec.got) - n
		}
		clk.SetTime(clk.Now().Add(time.Minute))
	}
	if conflicts != 1 {
		t.Errorf("RouterConflict announced in three passes after the tenant's six Services (room for 4): %d events, want 1", conflicts)
	}
}

// dropping records nothing while drop, and counts what it recorded.
type dropping struct {
	drop     bool
	recorded int
}

func (d *dropping) Event(*unstructured.Unstructured, bool, string, string) bool {
	if d.drop {
		return false
	}
	d.recorded++
	return true
}

// A text the Recorder drops is announced again at the next pass, until it
// is recorded; then it is not repeated while it stays the same (red team
// r7a: remembered though dropped, it was silenced for as long as it lasted).
func TestATextTheRecorderDroppedIsAnnouncedUntilRecordedOnce(t *testing.T) {
	d := &dropping{drop: true}
	e := Events{Recorder: d}
	u := &unstructured.Unstructured{}
	var announced []bool
	for pass := range 5 {
		d.drop = pass < 2 // the budget is spent for two passes
		announced = append(announced, e.Announce(OwnSubjects+"home/conflict", u, true, "RouterConflict", "two routers disagree"))
	}
	if diff := cmp.Diff([]bool{true, true, true, false, false}, announced); diff != "" || d.recorded != 1 {
		t.Errorf("recorded %d times, want 1; announced per pass (-want +got):\n%s", d.recorded, diff)
	}
}

// twoBudgets records which recorder each event went to.
type twoBudgets struct{ shared, own []string }

type ownView struct{ b *twoBudgets }

func (b *twoBudgets) Event(_ *unstructured.Unstructured, _ bool, reason, _ string) bool {
	b.shared = append(b.shared, reason)
	return true
}

func (b *twoBudgets) Own() Recorder { return ownView{b} }

func (v ownView) Event(_ *unstructured.Unstructured, _ bool, reason, _ string) bool {
	v.b.own = append(v.b.own, reason)
	return true
}

// A DynamicPrefix's own problems go to the recorder's own budget, but for
// its Services' conflicts (a tenant's objects steer their text) and anything
// not the DynamicPrefix's.
func TestADynamicPrefixsOwnProblemsHaveTheOwnBudget(t *testing.T) {
	b := &twoBudgets{}
	e := Events{Recorder: b}
	u := &unstructured.Unstructured{}
	e.Announce(OwnSubjects+"home/conflict", u, true, "RouterConflict", "")
	e.Announce(OwnSubjects+"home", u, true, "InvalidSpec", "")
	e.Announce(OwnSubjects+"home/services", u, true, "ServiceAddressConflict", "")
	e.Announce("svc/tenant/squat", u, true, "InvalidServiceAnnotations", "")
	if diff := cmp.Diff([]string{"ServiceAddressConflict", "InvalidServiceAnnotations"}, b.shared); diff != "" {
		t.Errorf("recorded under the shared budget (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"RouterConflict", "InvalidSpec"}, b.own); diff != "" {
		t.Errorf("recorded under the own budget (-want +got):\n%s", diff)
	}
}
