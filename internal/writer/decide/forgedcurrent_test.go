package decide

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/writer/model"
)

// TestAForgedCurrentPrefixNoNodeReportsIsNotHeldByATie (sixth red team,
// r6b): renumber-writer-status admits a prefix made current whenever the
// spec's prefixFilter accepts it - with allowedPrefixes unset (the default)
// any global /64 - and the writer replaces it at its next pass only if one
// prefix leads the ballot. Where two prefixes tie on every node (a second
// router on the link, each prefix preferred: TestASecondRoutersPrefixDoesNotWinTheRenumberingTie),
// choose holds "the current prefix" - here the token's, which no node
// reports and no ballot ever elected - and the honest writer pools it: it
// puts 2001:db8:bad::/64 into every following pool and onto every following
// Service, for as long as the two routers both advertise, after the token
// is revoked. The tie rule is for a current prefix the nodes still hold; one
// no node reports has nothing to hold it.
func TestAForgedCurrentPrefixNoNodeReportsIsNotHeldByATie(t *testing.T) {
	const (
		bad = "2001:db8:bad::/64"
		// A, the real router's, and the second router's 2000::/64: both
		// preferred on every node, for good.
		twoRouters = "v1;eth0=2000::/64 p ra+addr,2001:db8:a::/64 p ra+addr"
	)
	m := parse(eth0())
	honest := status(For(m, status(For(m, Status{}, reports(t, onA, onA, onA), t0)), reports(t, twoRouters, twoRouters, twoRouters), t0.Add(time.Minute)))
	if honest.CurrentPrefix != "2001:db8:a::/64" {
		t.Fatalf("honest current prefix %s, want A", honest.CurrentPrefix)
	}
	// The token's write, in the shape renumber-writer-status admits: the
	// new prefix active and current, acquired now; A draining from then.
	at := t0.Add(2 * time.Minute)
	forged := Status{CurrentPrefix: bad, PrefixSource: honest.PrefixSource, History: []HistoryEntry{
		{Prefix: bad, State: model.StateActive, AcquiredAt: at},
		{Prefix: "2001:db8:a::/64", State: model.StateDraining, AcquiredAt: honest.History[0].AcquiredAt, DeprecatedAt: at}}}
	st := forged
	for i := range 3 {
		d := For(m, st, reports(t, twoRouters, twoRouters, twoRouters), at.Add(time.Duration(i+1)*time.Minute))
		if d.Current.String() == bad || slices.ContainsFunc(d.Pooled, func(p netip.Prefix) bool { return p.String() == bad }) {
			t.Errorf("pass %d after the token's write: current %s, pooled %v - no node reports %s, and the honest writer pools it", i+1, d.Current, d.Pooled, bad)
			break
		}
		st = status(d)
	}
}

// A tie holds the current prefix while some node reports it - preferred
// beside a second router's, or deprecated while it drains, or on one node
// while the others restart - and not otherwise: a current prefix no node
// reports gives way to the prefix the status replaced last that some node
// still reports (the one the tie held before the token named another,
// undoing its write). Where none is, nothing moves and the tie is
// reported: the current prefix holds once the router's lifetime for it ran
// out (the lowest tied would be what a host advertising 2000::/64 from its
// own address chooses), and a token's prefix holds where it also erased
// the replaced one from the history (a limit, docs/security.md).
func TestATieHoldsOnlyACurrentPrefixSomeNodeReports(t *testing.T) {
	const (
		a, c       = "2001:db8:a::/64", "2000::/64"
		twoRouters = "v1;eth0=2000::/64 p ra+addr,2001:db8:a::/64 p ra+addr"
		renumbered = "v1;eth0=2000::/64 p ra+addr,2001:db8:a::/64 d600 ra+addr,2001:db8:b::/64 p ra+addr"
		restarted  = "v1;eth0="
		aGone      = "v1;eth0=2000::/64 p ra+addr,2001:db8:b::/64 p ra+addr"
	)
	at := t0.Add(2 * time.Minute)
	onTwo := status(For(parse(eth0()), status(For(parse(eth0()), Status{}, reports(t, onA, onA, onA), t0)), reports(t, twoRouters, twoRouters, twoRouters), t0.Add(time.Minute)))
	forge := func(current string, replaced ...string) Status {
		st := Status{CurrentPrefix: current, PrefixSource: onTwo.PrefixSource, History: []HistoryEntry{{Prefix: current, State: model.StateActive, AcquiredAt: at}}}
		for i, p := range replaced {
			st.History = append(st.History, HistoryEntry{Prefix: p, State: model.StateDraining, AcquiredAt: t0, DeprecatedAt: at.Add(-time.Duration(i) * time.Second)})
		}
		return st
	}
	for _, c := range []struct {
		name    string
		st      Status
		digests []string
		want    string
		tied    bool // the tie is reported (PrefixRejected)
	}{
		{"a second router's prefix beside the current one", onTwo, []string{twoRouters, twoRouters, twoRouters}, a, false},
		{"the router renumbers beside a second router: the current one drains", onTwo, []string{renumbered, renumbered, renumbered}, a, true},
		{"an agent restarts", onTwo, []string{renumbered, renumbered, restarted}, a, true},
		{"one node still reports the current one", onTwo, []string{renumbered, aGone, aGone}, a, true},
		{"a forged current no node reports, A replaced last", forge("2001:db8:bad::/64", a, c), []string{twoRouters, twoRouters, twoRouters}, a, false},
		{"a forged current no node reports, 2000::/64 replaced last", forge("2001:db8:bad::/64", c, a), []string{twoRouters, twoRouters, twoRouters}, c, false},
		{"a forged current no node reports, A replaced before a renumbering's tie", forge("2001:db8:bad::/64", a), []string{renumbered, renumbered, renumbered}, a, true},
		{"the router's lifetime for the current one ran out during the tie", onTwo, []string{aGone, aGone, aGone}, a, true},
		{"a forged current no node reports, the replaced one erased", forge("2001:db8:bad::/64"), []string{twoRouters, twoRouters, twoRouters}, "2001:db8:bad::/64", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := For(parse(eth0()), c.st, reports(t, c.digests...), at.Add(time.Minute))
			if d.Current.String() != c.want {
				t.Errorf("current %s, want %s", d.Current, c.want)
			}
			if tied := slices.ContainsFunc(d.Rejected, func(r Rejected) bool { return strings.Contains(r.Reason, "ties with") }); tied != c.tied {
				t.Errorf("tie reported %v, want %v: %+v", tied, c.tied, d.Rejected)
			}
		})
	}
}
