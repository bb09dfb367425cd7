package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/render"
)

// With two eligible nodes, a client and a confirmer that disagree cannot be
// told apart (one of them lies, or has not seen a renumbering): nothing
// moves, and once the disagreement outlasts the lifetime the server stated
// for the current delegation it is reported - Degraded DelegationStalled
// and one Warning naming the way out - written once.

// stalled: home, converged on delegA with two nodes, has its client (node-0)
// hold delegA while the server offers its confirmer (node-1) delegB - the
// digests re-sent unchanged at every pass - until the stall is reported,
// asserting every step on the way. It returns when the disagreement began.
func stalled(t *testing.T) (*fixture, []string, time.Time) {
	t.Helper()
	f := pdConverged(t, 2)
	blocks, _ := f.pool()
	disagree := func() { f.delegations(pdNode{held: delegA}, pdNode{offered: delegB}) }
	begin := f.clock.Now()
	disagree()
	if got, want := f.sync(passHome), []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
		t.Fatalf("the disagreement's first pass wrote %q, want %q", got, want)
	}
	if want := []string{render.ReasonDisagree + " home"}; !slices.Equal(f.events.warnings, want) {
		t.Errorf("the disagreement's Warnings %q, want %q", f.events.warnings, want)
	}
	f.catchUp()
	f.events.reset()
	// Before the stated lifetime has passed: a renumbering an honest
	// client renews into within it - not Degraded, nothing written.
	for _, at := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, stated - time.Second} {
		f.clock.SetTime(begin.Add(at))
		disagree()
		if got := f.sync(passHome); len(got) != 0 {
			t.Fatalf("%v into the disagreement, before the stated %v, the pass wrote %q", at, stated, got)
		}
		if c := f.condition(render.Degraded); c.Status != metav1.ConditionFalse {
			t.Fatalf("%v into the disagreement, before the stated %v: Degraded %s %s", at, stated, c.Status, c.Reason)
		}
	}
	if len(f.events.reasons) != 0 {
		t.Errorf("before the stated lifetime, events %q", f.events.reasons)
	}
	// The lifetime stated has passed: one status write, one Warning.
	f.clock.SetTime(begin.Add(stated))
	disagree()
	if got, want := f.sync(passHome), []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
		t.Fatalf("the stall's pass wrote %q, want %q", got, want)
	}
	if want := []string{render.ReasonStalled + " home"}; !slices.Equal(f.events.reasons, want) || !slices.Equal(f.events.warnings, want) {
		t.Errorf("the stall's events %q (Warnings %q), want one Warning %q", f.events.reasons, f.events.warnings, want)
	} else if msg := f.events.messages[0]; !strings.Contains(msg, "spec.acquisition.dhcpv6pd.nodeNames") || !strings.Contains(msg, "third node") {
		t.Errorf("the Warning does not name the way out (nodeNames, a third node): %q", msg)
	}
	if c := f.condition(render.Degraded); c.Status != metav1.ConditionTrue || c.Reason != render.ReasonStalled {
		t.Errorf("Degraded %s %s, want True %s", c.Status, c.Reason, render.ReasonStalled)
	}
	f.catchUp()
	f.events.reset()
	// An hour of passes, the digests re-sent unchanged: nothing written.
	f.atRest("into the stall", disagree)
	if len(f.events.reasons) != 0 {
		t.Errorf("through the stall, events %q", f.events.reasons)
	}
	f.held(blocks)
	return f, blocks, begin
}

// held asserts nothing moved: home follows delegA, and the pool holds what
// it held.
func (f *fixture) held(blocks []string) {
	f.t.Helper()
	if st := f.status(); st.CurrentPrefix != delegA || len(st.History) != 1 {
		f.t.Errorf("current %q, history %+v; want %s alone", st.CurrentPrefix, st.History, delegA)
	}
	if got, _ := f.pool(); !slices.Equal(got, blocks) {
		f.t.Errorf("pool %q, want %q as it was", got, blocks)
	}
}

func TestATwoNodeStallIsReportedOnceAndNothingMoves(t *testing.T) {
	stalled(t)
}

// The stall ends when the disagreement does: the confirmer is offered what
// the client holds, or nodeNames leaves the client alone (the admin trusts
// it). The condition clears in one status write; nothing else moves.
func TestAStallEndsInOneWriteAndNothingMoves(t *testing.T) {
	for _, c := range []struct {
		name   string
		end    func(f *fixture)
		events []string
		again  bool // a later disagreement, as long, is announced again
	}{
		{
			name:   "the confirmer agrees",
			end:    func(f *fixture) { f.delegations(pdNode{held: delegA}, pdNode{offered: delegA}) },
			events: []string{render.ReasonConfirmed + " home"}, // agree again: Normal
			again:  true,
		},
		{
			name: "nodeNames names the client alone",
			end: func(f *fixture) {
				f.followPD("home", pdSpec("wan", "node-0"))
				f.delegations(pdNode{held: delegA}, pdNode{offered: delegB})
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, blocks, _ := stalled(t)
			c.end(f)
			f.clock.Step(time.Minute)
			if got, want := f.sync(passHome), []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
				t.Fatalf("the stall's end wrote %q, want %q", got, want)
			}
			if !slices.Equal(f.events.reasons, c.events) || len(f.events.warnings) != 0 {
				t.Errorf("events %q (Warnings %q), want %q", f.events.reasons, f.events.warnings, c.events)
			}
			if c := f.condition(render.Degraded); c.Status != metav1.ConditionFalse {
				t.Errorf("Degraded %s %s: %s", c.Status, c.Reason, c.Message)
			}
			if c := f.condition(render.DelegationConfirmed); c.Status != metav1.ConditionTrue {
				t.Errorf("DelegationConfirmed %s %s: %s", c.Status, c.Reason, c.Message)
			}
			if !meta.IsStatusConditionTrue(f.status().Conditions, render.Ready) {
				t.Errorf("not Ready: %+v", f.condition(render.Ready))
			}
			f.held(blocks)
			f.catchUp()
			f.events.reset()
			f.clock.Step(time.Hour)
			if got := f.sync(passHome); len(got) != 0 || len(f.events.reasons) != 0 {
				t.Errorf("ended, nothing new: wrote %q, events %q", got, f.events.reasons)
			}
			if !c.again {
				return
			}
			// A new disagreement, as long: a new stall, announced again.
			f.delegations(pdNode{held: delegA}, pdNode{offered: delegB})
			f.sync(passHome)
			f.catchUp()
			f.clock.Step(stated)
			f.events.reset()
			if got, want := f.sync(passHome), []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
				t.Fatalf("a second stall wrote %q, want %q", got, want)
			}
			if want := []string{render.ReasonStalled + " home"}; !slices.Equal(f.events.warnings, want) {
				t.Errorf("a second stall's Warnings %q, want %q", f.events.warnings, want)
			}
		})
	}
}

// A status.dhcpv6pd.since a stolen writer token sets in year 1 (the
// earliest renumber-writer-status admits) while the pair disagrees: each
// pass asks for the next a bound later, never at once - now.Sub saturated
// at 292 years, the wake landed before now and the pass queued itself
// again at once, for as long as the two disagreed (red team r6b).
func TestAForgedSinceQueuesNoPassAtOnce(t *testing.T) {
	f := pdConverged(t, 2)
	disagree := func() { f.delegations(pdNode{held: delegA}, pdNode{offered: delegB}) }
	disagree()
	f.sync(passHome)
	f.catchUp()
	f.edit(api.GVR, "home", `{"status":{"dhcpv6pd":{"since":"0001-01-01T00:00:01Z"}}}`)
	for i := range 5 { // the clock stands still: a wake later than now never comes due
		f.emptyQueue()
		disagree()
		f.sync(passHome)
		if f.emptyQueue() {
			t.Fatalf("pass %d over a since in year 1 (status %+v) queued the next at once", i, f.status().DHCPv6PD)
		}
		f.catchUp()
	}
	held, _ := f.pool()
	f.held(held)
}
