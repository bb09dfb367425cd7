package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/writer/model"
)

// Issue 42, a stolen writer token: the CRD enumerates a history entry's
// state (active, draining, expired) but does not require it, and a status
// written before renumber-writer-status required it (or with the policies
// off) may hold an entry without one. Read as neither active nor draining,
// it never expired and, not expired, was pooled: one write dropping the
// state of an honest draining entry kept the prefix in every following
// pool for ever, past its deadline and the token's revocation. And the
// writer wrote it back as "state": "", which the CRD's enum refuses, so its
// status writes stalled too. Such an entry expires.
func TestAHistoryEntryWithoutAStateIsNotPooledForEver(t *testing.T) {
	long := answer("s1", pubB, "", pubA)
	long.Digest.Links[0].Prefixes[1].Remaining = 2 * time.Hour
	moved := For(parse(byName()), st0(t), []Report{long, long, answer("s3", pubB, "")}, t0.Add(time.Hour))
	forged := status(moved)
	if forged.History[1].Prefix != pubA.String() || forged.History[1].State != model.StateDraining {
		t.Fatalf("before: history %+v", forged.History)
	}
	// The token's write: A's entry without its state (and its deadline).
	forged.History[1].State, forged.History[1].ExpiresAt = "", time.Time{}
	now := t0.Add(30 * 24 * time.Hour)
	d := For(parse(byName()), forged, []Report{answer("s1", pubB, ""), answer("s2", pubB, ""), answer("s3", pubB, "")}, now)
	if slices.Contains(d.Pooled, pubA) {
		t.Errorf("30 days on, no server naming it, %s is still pooled (history %+v): an entry without a state drains for ever", pubA, d.History)
	}
	for _, h := range d.History {
		if !slices.Contains([]string{model.StateActive, model.StateDraining, model.StateExpired}, h.State) {
			t.Errorf("the writer would write history entry %s with state %q, which the CRD's enum [active, draining, expired] refuses: every status write fails", h.Prefix, h.State)
		}
	}
}
