package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/writer/model"
)

// Red team (issue 42, a stolen writer token): the status is the writer's
// only memory, and the token writes it. A DynamicPrefix following a name
// drains a replaced prefix until its deadline alone - so a deadline the
// token forged (any expiresAt; renumber-writer-status checks none) keeps a
// prefix no server names in every following pool for as long as it says,
// after the token is revoked, by the honest writer. docs/security.md: "a TTL
// is read as at most seven days, so no server can keep a replaced prefix in
// the pools for longer"; the drain after a DNS move is at most
// max(maxInterval, 7 days).
func TestAForgedDrainDeadlineIsNotBelievedPastTheLongestDrain(t *testing.T) {
	forged := st0(t)
	forged.History = append(forged.History, HistoryEntry{Prefix: pubX.String(), State: model.StateDraining,
		DeprecatedAt: t0, ExpiresAt: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)})
	// Thirty days on, every server answers A, as it has all along.
	now := t0.Add(30 * 24 * time.Hour)
	d := For(parse(byName()), forged, []Report{answer("s1", pubA, ""), answer("s2", pubA, ""), answer("s3", pubA, "")}, now)
	if slices.Contains(d.Pooled, pubX) {
		t.Errorf("30 days on, no server naming it, %s is still pooled (history %+v): the forged deadline is believed", pubX, d.History)
	}
}
