package permit

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
)

// Issue 42 (red team r6a): Events bounds the subjects it remembers
// (maxAnnounced) by forgetting them all at once past the bound. A tenant
// with one Service more than the bound, each announced every pass (a subnet
// name the spec lacks: InvalidServiceAnnotations; or a conflict), makes the
// memory thrash: every pass - and any edit of any of its Services brings one
// - announces every subject again, one Kubernetes event written per
// Service per pass at steady state. Wanted: a pass that announces what it
// announced before, unchanged, writes no event but for the subjects past
// the bound - one here, the least any memory of maxAnnounced subjects can
// write (what it does not hold may have changed): the memory keeps the
// subjects it holds while they are announced (Events;
// FuzzAnnouncingIsBoundedAndRepeatsOnlyPastTheBound states it for any set).
func TestAnnouncingPastTheBoundDoesNotRepeatEveryPass(t *testing.T) {
	c := &notes{}
	e := Events{Recorder: c, Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))}
	u := &unstructured.Unstructured{}
	pass := func() {
		for i := range maxAnnounced + 1 {
			e.Announce(fmt.Sprintf("svc/services/tenant/s%d", i), u, true, "InvalidServiceAnnotations", fmt.Sprintf("s%d: subnet nosuch is not in the spec", i))
		}
	}
	pass()
	first := len(c.got)
	for range 3 {
		pass()
	}
	again := c.got[first:]
	want := fmt.Sprintf("InvalidServiceAnnotationss%d: subnet nosuch is not in the spec", maxAnnounced)
	if len(again) != 3 || again[0] != want || again[1] != want || again[2] != want {
		t.Errorf("three passes announcing the same %d subjects unchanged wrote %d events (first %.80q), want 3: the one past the bound, once a pass", maxAnnounced+1, len(again), again[:min(1, len(again))])
	}
}
