package permit

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Issue 42 (red team r6a): Events bounds the subjects it remembers
// (maxAnnounced) by forgetting them all at once past the bound. A tenant
// with one Service more than the bound, each announced every pass (a subnet
// name the spec lacks: InvalidServiceAnnotations; or a conflict), makes the
// memory thrash: every pass - and any edit of any of its Services brings one
// - announces every subject again, one Kubernetes event written per
// Service per pass at steady state. Wanted: a pass that announces what it
// announced before, unchanged, writes no event (at most a few, say one per
// subject past the bound), e.g. evicting one subject at a time, not all.
func TestAnnouncingPastTheBoundDoesNotRepeatEveryPass(t *testing.T) {
	c := &count{}
	e := Events{Recorder: c}
	u := &unstructured.Unstructured{}
	pass := func() {
		for i := range maxAnnounced + 1 {
			e.Announce(fmt.Sprintf("svc/services/tenant/s%d", i), u, true, "InvalidServiceAnnotations", "subnet nosuch is not in the spec")
		}
	}
	pass()
	first := len(c.reasons)
	for range 3 {
		pass()
	}
	if again := len(c.reasons) - first; again > 3 {
		t.Errorf("three passes announcing the same %d subjects unchanged wrote %d events, want at most 3", maxAnnounced+1, again)
	}
}
