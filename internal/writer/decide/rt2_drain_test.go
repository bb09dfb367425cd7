package decide

import (
	"slices"
	"testing"
	"time"
)

// Red team, round 2 (issue 42, a stolen writer token; the drain bound):
// renumber-writer-status lets a write keep a draining entry with a deadline
// "no later than it was" - an earlier deprecatedAt passes. drainBound reads
// deprecatedAt as when the prefix was replaced and cuts the drain to
// deprecatedAt + max(maxInterval, MaxTTL): a deprecatedAt moved back a
// month ends, at the next decision, an honest drain the writer set itself
// (its answers' TTL) with the servers' answers still naming it. Before
// drainBound, only the status's own deadline ended a name's drain, and an
// earlier deprecatedAt changed nothing.
func TestRT2AnEarlierDeprecatedAtDoesNotCutAnHonestDrainShort(t *testing.T) {
	long := answer("s1", pubB, "", pubA)
	long.Digest.Links[0].Prefixes[1].Remaining = 2 * time.Hour
	moved := For(parse(byName()), st0(t), []Report{long, long, answer("s3", pubB, "")}, t0.Add(time.Hour))
	if exp := moved.History[1].ExpiresAt; !exp.Equal(t0.Add(3 * time.Hour)) {
		t.Fatalf("before: %s drains until %v, want t0+3h", pubA, exp)
	}
	forged := status(moved)
	// The token's write: the same expiresAt, deprecatedAt a month earlier
	// (both "no later than" the writer's; the policy admits it).
	forged.History[1].DeprecatedAt = forged.History[1].DeprecatedAt.Add(-30 * 24 * time.Hour)
	now := t0.Add(time.Hour + time.Minute)
	d := For(parse(byName()), forged, []Report{long, long, answer("s3", pubB, "")}, now)
	if !slices.Contains(d.Pooled, pubA) {
		t.Errorf("at %v, %s (its answers' TTL runs to t0+3h) is no longer pooled: history %+v - a forged earlier deprecatedAt cut an honest drain short", now, pubA, d.History)
	}
}
