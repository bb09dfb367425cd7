package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/writer/render"
)

// spec.acquisition.dhcpv6pd.trustClientAfter, the user's bound on a stall
// no rotation settles: with two eligible nodes, the client holds a
// renumbering its confirmer denies. Until the bound nothing moves and, past
// the disagreement's first write, nothing is written; on the pass at the
// bound the cluster moves - the pool, the status, the Service - with one
// Warning, ClientTrusted; then, at rest, nothing is written again.
func TestTrustClientAfterMovesTheClusterOnceTheBoundPasses(t *testing.T) {
	f := pdConverged(t, 2)
	spec := pdSpec("wan")
	spec["trustClientAfter"] = "30m"
	f.followPD("home", spec)
	blocks, _ := f.pool()
	begin := f.clock.Now()
	renumbered := func() { f.delegations(pdNode{held: delegB}, pdNode{offered: delegA}) }
	renumbered()
	if got, want := f.sync(passHome), []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
		t.Fatalf("the disagreement's first pass wrote %q, want %q", got, want)
	}
	f.catchUp()
	if pd := f.status().DHCPv6PD; pd.UnconfirmedSince != begin.UTC().Format(time.RFC3339) {
		t.Fatalf("unconfirmedSince %q, want %s", pd.UnconfirmedSince, begin.UTC().Format(time.RFC3339))
	}
	f.events.reset()
	for _, at := range []time.Duration{time.Minute, stated - time.Second, stated, stated + time.Minute, 20 * time.Minute, 30*time.Minute - time.Second} {
		f.clock.SetTime(begin.Add(at))
		renumbered()
		got := f.sync(passHome)
		if at == stated {
			// The stall outlasts the lifetime stated: reported, as without
			// the bound (TestATwoNodeStallIsReportedOnceAndNothingMoves).
			if want := []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
				t.Fatalf("at the lifetime stated the pass wrote %q, want %q", got, want)
			}
			f.catchUp()
			continue
		}
		if len(got) != 0 {
			t.Fatalf("%v into the disagreement, before the bound, the pass wrote %q", at, got)
		}
	}
	f.held(blocks)
	if c := f.condition(render.Degraded); c.Reason != render.ReasonStalled {
		t.Errorf("before the bound: Degraded %s %s", c.Status, c.Reason)
	}
	if slices.Contains(f.events.reasons, render.ReasonTrusted+" home") {
		t.Errorf("before the bound, events %q", f.events.reasons)
	}
	f.clock.SetTime(begin.Add(30 * time.Minute))
	renumbered()
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("the bound's pass wrote %q, want %q", got, want)
	}
	if st := f.status(); st.CurrentPrefix != delegB {
		t.Errorf("current %s, want %s", st.CurrentPrefix, delegB)
	}
	if c := f.condition(render.Degraded); c.Reason == render.ReasonStalled {
		t.Errorf("trusted, yet Degraded %s %s", c.Status, c.Reason)
	}
	if !slices.Contains(f.events.warnings, render.ReasonTrusted+" home") {
		t.Errorf("Warnings %q, want one %s", f.events.warnings, render.ReasonTrusted)
	} else if i := slices.Index(f.events.reasons, render.ReasonTrusted+" home"); !strings.Contains(f.events.messages[i], "trustClientAfter") {
		t.Errorf("the Warning does not name the bound: %q", f.events.messages[i])
	}
	f.catchUp()
	f.events.reset()
	f.atRest("after the bound", renumbered)
	if slices.Contains(f.events.reasons, render.ReasonTrusted+" home") {
		t.Errorf("after the bound, %s announced again: %q", render.ReasonTrusted, f.events.reasons)
	}
}
