package decide

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/writer/model"
)

// A stolen writer token (issue 42) writes the status, and the status is the
// writer's only memory: a drain deadline in it is believed only as far as
// the writer could have set it.

var forever = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// A DynamicPrefix following a name drains a replaced prefix until its
// deadline alone, so a deadline the token forged (renumber-writer-status
// checks none) would keep a prefix no server names in every following pool
// for as long as it says, after the token is revoked, by the honest writer.
// docs/security.md: "a TTL is read as at most seven days, so no server can
// keep a replaced prefix in the pools for longer"; the drain after a DNS
// move is at most max(maxInterval, 7 days).
func TestAForgedDrainDeadlineIsNotBelievedPastTheLongestDrain(t *testing.T) {
	forged := st0(t)
	forged.History = append(forged.History, HistoryEntry{Prefix: pubX.String(), State: model.StateDraining,
		DeprecatedAt: t0, ExpiresAt: forever})
	// Thirty days on, every server answers A, as it has all along.
	now := t0.Add(30 * 24 * time.Hour)
	d := For(parse(byName()), forged, []Report{answer("s1", pubA, ""), answer("s2", pubA, ""), answer("s3", pubA, "")}, now)
	if slices.Contains(d.Pooled, pubX) {
		t.Errorf("30 days on, no server naming it, %s is still pooled (history %+v): the forged deadline is believed", pubX, d.History)
	}
	// Forged today: it drains no longer than the writer's longest drain
	// from now, and the bound is what the status says from then on.
	d = For(parse(byName()), forged, []Report{answer("s1", pubA, ""), answer("s2", pubA, ""), answer("s3", pubA, "")}, t0.Add(time.Hour))
	if got := d.History[1].ExpiresAt; !got.Equal(t0.Add(MaxTTL)) {
		t.Errorf("the forged drain ends %v, want %v (deprecatedAt + 7 days)", got, t0.Add(MaxTTL))
	}
}

func TestADrainDeadlineIsAtMostTheLongestDrainTheWriterSets(t *testing.T) {
	now := t0.Add(time.Hour)
	week := 7 * 24 * time.Hour
	for _, tc := range []struct {
		name        string
		entry       HistoryEntry
		maxInterval time.Duration
		want        time.Time
	}{
		{"the writer's own deadline is kept", HistoryEntry{DeprecatedAt: t0, ExpiresAt: t0.Add(10 * time.Minute)}, 10 * time.Minute, t0.Add(10 * time.Minute)},
		{"a TTL's seven days are kept", HistoryEntry{DeprecatedAt: t0, ExpiresAt: t0.Add(week)}, 10 * time.Minute, t0.Add(week)},
		{"a forged year is seven days", HistoryEntry{DeprecatedAt: t0, ExpiresAt: forever}, 10 * time.Minute, t0.Add(week)},
		{"a maxInterval past seven days bounds it", HistoryEntry{DeprecatedAt: t0, ExpiresAt: forever}, 30 * 24 * time.Hour, t0.Add(30 * 24 * time.Hour)},
		{"a deprecatedAt in the future counts as now", HistoryEntry{DeprecatedAt: forever, ExpiresAt: forever}, 10 * time.Minute, now.Add(week)},
		{"no deprecatedAt counts as now", HistoryEntry{ExpiresAt: forever}, 10 * time.Minute, now.Add(week)},
		{"no deadline stays none (the drain then ends with its answers)", HistoryEntry{DeprecatedAt: t0}, 10 * time.Minute, time.Time{}},
		{"a fractional maxInterval rounds up to the writer's second",
			HistoryEntry{DeprecatedAt: t0, ExpiresAt: t0.Add(8 * 24 * time.Hour)}, week + 500*time.Millisecond, t0.Add(week + time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, drainBound(tc.entry, tc.maxInterval, now)); diff != "" {
				t.Errorf("deadline (-want +got):\n%s", diff)
			}
		})
	}
}

// Where nodes vote (router advertisements), a drain also ends when a
// majority stops reporting the prefix - when the lifetime their router
// stated runs out - so a forged deadline keeps nothing past that.
func TestAForgedDrainDeadlineEndsWithTheNodesReports(t *testing.T) {
	const (
		deprecatedX = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:bad::/64 d600 ra"
	)
	x := "2001:db8:bad::/64"
	forged := status(For(parse(eth0()), Status{}, reports(t, onA, onA, onA), t0))
	forged.History = append(forged.History, HistoryEntry{Prefix: x, State: model.StateDraining, DeprecatedAt: t0, ExpiresAt: forever})
	pooled := func(d Decision) bool {
		return slices.ContainsFunc(d.Pooled, func(p netip.Prefix) bool { return p.String() == x })
	}
	if d := For(parse(eth0()), forged, reports(t, onA, onA, onA), t0.Add(time.Minute)); pooled(d) {
		t.Errorf("no node reports %s, and it is pooled: %s", x, d)
	}
	if d := For(parse(eth0()), forged, reports(t, deprecatedX, deprecatedX, onA), t0.Add(time.Minute)); !pooled(d) {
		t.Errorf("a majority reports %s deprecated, with 600 s left, and it is not pooled: %s", x, d)
	}
	if d := For(parse(eth0()), forged, reports(t, deprecatedX, onA, onA), t0.Add(11*time.Minute)); pooled(d) {
		t.Errorf("its lifetime passed on a majority, and %s is pooled: %s", x, d)
	}
}

// At a renumbering the writer stamps the replaced entry's deprecatedAt and
// the new entry's acquiredAt with one time, never before the replaced
// entry was acquired: renumber-writer-status admits nothing else (a
// backdated deprecatedAt would cut a drain short through drainBound). The
// last leader's clock ahead of this one's, or a stolen token's acquiredAt
// in the future, would otherwise have every status write refused from then
// on; the transition is stamped at that acquiredAt instead.
func TestATransitionIsStampedNoEarlierThanTheEntryItReplaces(t *testing.T) {
	for _, acquired := range []time.Time{t0.Add(-time.Hour), t0.Add(3 * time.Second), forever} {
		prev := Status{CurrentPrefix: "2001:db8:a::/64", PrefixSource: "router-advertisement",
			History: []HistoryEntry{{Prefix: "2001:db8:a::/64", State: model.StateActive, AcquiredAt: acquired}}}
		d := For(parse(eth0()), prev, reports(t, onlyB, onlyB, onlyB), t0)
		stamp := t0
		if acquired.After(t0) {
			stamp = acquired
		}
		want := []HistoryEntry{
			{Prefix: "2001:db8:b::/64", State: model.StateActive, AcquiredAt: stamp},
			{Prefix: "2001:db8:a::/64", State: model.StateExpired, AcquiredAt: acquired, DeprecatedAt: stamp},
		}
		if diff := cmp.Diff(want, d.History); diff != "" {
			t.Errorf("the entry acquired at %v replaced at %v (-want +got):\n%s", acquired, t0, diff)
		}
	}
}
