package apply

import (
	"fmt"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/writer/permit"
)

// Red team r7a: a tenant spends the event budget (its own Services' warnings:
// 100 Services with an invalid annotation, the default burst), and in that
// window a DynamicPrefix's own warning is dropped by the budget. permit.Events
// remembers it as announced all the same, so every later pass, with the
// budget full again, finds the text unchanged and never records it: the
// honest warning is silenced for as long as the problem lasts - the "memory of
// its own, which no tenant fills" notwithstanding, as the budget is shared.
func TestRT7AWarningDroppedByTheBudgetIsAnnouncedOnceItRefills(t *testing.T) {
	// One budget for all, as r7a found it: forgetting what was dropped
	// must be enough on its own.
	e, clk, recorded := budgeted(t, false)
	for i := range 100 { // the tenant's Services, one warning each: the burst
		e.Announce(fmt.Sprintf("svc/tenant/s%d", i), object("v1", "Service", "tenant", fmt.Sprintf("s%d", i)), true, "InvalidServiceAnnotations", "no such subnet")
	}
	dp := object("dynamic-prefix.io/v1alpha1", "DynamicPrefix", "", "home")
	// The DynamicPrefix's problem begins now and lasts: every pass announces it.
	for range 10 {
		e.Announce(permit.OwnSubjects+"home/conflict", dp, true, "RouterConflict", "two routers disagree")
		clk.Step(time.Minute)
	}
	if got := recorded()["RouterConflict"]; got != 1 {
		t.Errorf("RouterConflict recorded in ten passes over ten minutes (the budget refilled after the first): %d events, want 1", got)
	}
}
