package decide

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/writer/model"
)

// TestATieHoldsNoCurrentPrefixNoNodePrefers (seventh red team, r7b): the
// fix of r6b's finding 2 holds a tie's current prefix while some node
// *reports* it - and a prefix the router still advertises deprecated (the
// one it replaced before, for the rest of its valid lifetime) is reported
// by every node, preferred by none. On a link with two routers (A and
// 2000::/64 preferred on every node: a tie the honest writer settles by
// keeping A), a stolen writer token names that deprecated prefix O current
// - directly, or with O draining and replaced last behind a prefix no node
// reports (choose returns a replaced prefix a node reports even when it is
// not among the tied). The honest writer then holds O: every following
// Service and pool renumbered onto a prefix the router deprecated, which
// no node (and no ballot) ever elected, for as long as the router keeps
// advertising it, after the token is revoked. The honest shapes the rule
// is for - the current prefix deprecated during a renumbering's tie - are
// TestATieHoldsOnlyACurrentPrefixSomeNodeReports's rows (still held there:
// A was elected while preferred; O here never was).
func TestATieHoldsNoCurrentPrefixNoNodePrefers(t *testing.T) {
	const (
		a, old = "2001:db8:a::/64", "2001:db8:1::/64"
		// A and the second router's 2000::/64 preferred on every node;
		// the router's previous prefix O still advertised deprecated,
		// two hours left.
		tie = "v1;eth0=2000::/64 p ra+addr,2001:db8:1::/64 d7200 ra+addr,2001:db8:a::/64 p ra+addr"
	)
	m := parse(eth0())
	honest := status(For(m, status(For(m, Status{}, reports(t, onA, onA, onA), t0)), reports(t, tie, tie, tie), t0.Add(time.Minute)))
	if honest.CurrentPrefix != a {
		t.Fatalf("honest current prefix %s, want %s", honest.CurrentPrefix, a)
	}
	at := t0.Add(2 * time.Minute)
	acquired := honest.History[0].AcquiredAt
	for _, c := range []struct {
		name string
		st   Status
	}{
		{"O named current, A draining", Status{CurrentPrefix: old, PrefixSource: honest.PrefixSource, History: []HistoryEntry{
			{Prefix: old, State: model.StateActive, AcquiredAt: at},
			{Prefix: a, State: model.StateDraining, AcquiredAt: acquired, DeprecatedAt: at}}}},
		// Two writes earlier: O made current at at, then a prefix no node
		// reports made current a second later, O draining from then -
		// replaced last, so choose's way back takes O, not the tied A.
		{"a prefix no node reports named current, O replaced last", Status{CurrentPrefix: "2001:db8:bad::/64", PrefixSource: honest.PrefixSource, History: []HistoryEntry{
			{Prefix: "2001:db8:bad::/64", State: model.StateActive, AcquiredAt: at.Add(time.Second)},
			{Prefix: old, State: model.StateDraining, AcquiredAt: at, DeprecatedAt: at.Add(time.Second)},
			{Prefix: a, State: model.StateDraining, AcquiredAt: acquired, DeprecatedAt: at}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := c.st
			for i := range 3 {
				d := For(m, st, reports(t, tie, tie, tie), at.Add(time.Duration(i+1)*time.Minute))
				if d.Current.String() == old {
					t.Errorf("pass %d after the token's write: current %s (pooled %v) - every node prefers %s or 2000::/64 and none %s; the nodes elected %s",
						i+1, d.Current, d.Pooled, a, old, a)
					break
				}
				if !slices.Contains(d.Pooled, netip.MustParsePrefix(a)) {
					t.Errorf("pass %d: %s, which every node prefers and the nodes elected, is not pooled: %v", i+1, a, d.Pooled)
				}
				st = status(d)
			}
		})
	}
}
