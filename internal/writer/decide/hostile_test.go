package decide

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
)

// One node's digest is anyone's who can patch that Node: it decides nothing
// alone (lessons.md, "A hostile LAN").

const onX = "v1;eth0=2001:db8:bad::/64 p ra"

func TestOneNodeDoesNotAdoptTheFirstPrefix(t *testing.T) {
	empty := "v1;eth0="
	if d := For(parse(eth0()), Status{}, reports(t, onX, empty, empty), t0); d.Current.IsValid() {
		t.Errorf("one node of three adopted %s", d.Current)
	}
	if d := For(parse(eth0()), Status{}, reports(t, onX, onX, empty), t0); d.Current.String() != "2001:db8:bad::/64" {
		t.Errorf("two of three: %s, want adopted", d)
	}
	if d := For(parse(eth0()), Status{}, reports(t, onX), t0); !d.Current.IsValid() {
		t.Errorf("a one-node cluster's only node: %s, want adopted", d)
	}
}

func TestOneNodeDoesNotMoveACurrentPrefixNobodyPrefers(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onA, onA, onA), t0))
	// The router went quiet and A is deprecated everywhere; one node says X.
	deprecated := "v1;eth0=2001:db8:a::/64 d600 ra"
	hostile := "v1;eth0=2001:db8:a::/64 d600 ra,2001:db8:bad::/64 p ra"
	if d := For(parse(eth0()), st, reports(t, hostile, deprecated, deprecated), t0.Add(time.Hour)); d.Changed {
		t.Errorf("one node moved a current prefix nobody prefers: %s", d)
	}
	if d := For(parse(eth0()), st, reports(t, hostile, hostile, deprecated), t0.Add(time.Hour)); !d.Changed {
		t.Errorf("a majority did not: %s", d)
	}
}

// A node preferring both the current prefix and another holds the current
// one against nothing: four nodes while the router renumbers A -> B -> C,
// one still on B, one on C, one restarted and silent. The liar voting C
// alone needs a majority (three); voting A as well, it counted as holding
// A, the bound fell to the quorum (one) and C, with one honest vote and
// its own, moved the cluster (FuzzBallot, input ba0050621e0c91a1). A node
// preferring A alone still holds it: then C needs only to lead.
func TestOneNodePreferringTheCurrentPrefixAndAnotherHoldsNeither(t *testing.T) {
	const (
		behind   = "v1;eth0=2001:db8:a::/64 d480 ra,2001:db8:b::/64 p ra"
		ahead    = "v1;eth0=2001:db8:a::/64 d480 ra,2001:db8:b::/64 d480 ra,2001:db8:c::/64 p ra"
		silent   = "v1;eth0="
		liarBoth = "v1;eth0=2001:db8:a::/64 p ra,2001:db8:c::/64 p ra"
		liarC    = "v1;eth0=2001:db8:c::/64 p ra"
	)
	st := status(For(parse(eth0()), Status{}, reports(t, onA, onA, onA, onA), t0))
	for _, c := range []struct {
		name    string
		digests []string
		want    string
	}{
		{"the liar votes C alone", []string{liarC, behind, ahead, silent}, "2001:db8:a::/64"},
		{"the liar votes A and C", []string{liarBoth, behind, ahead, silent}, "2001:db8:a::/64"},
		{"an honest node still on A holds it; two on C lead", []string{onA, ahead, ahead, silent}, "2001:db8:c::/64"},
	} {
		if d := For(parse(eth0()), st, reports(t, c.digests...), t0.Add(time.Minute)); d.Current.String() != c.want {
			t.Errorf("%s: current %s, want %s", c.name, d.Current, c.want)
		}
	}
}

func TestAReplacedPrefixDrainsForWhatTheMajorityReports(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onA, onA, onA), t0))
	huge := "v1;eth0=2001:db8:a::/64 d4294967295 ra,2001:db8:b::/64 p ra"
	d := For(parse(eth0()), st, reports(t, huge, onB, onB), t0.Add(time.Minute))
	if !d.Changed || len(d.History) != 2 || d.History[1].ExpiresAt.IsZero() {
		t.Fatalf("history %+v", d.History)
	}
	if got, want := d.History[1].ExpiresAt, t0.Add(time.Minute+600*time.Second); !got.Equal(want) {
		t.Errorf("A drains until %s, want %s (600 s, what two of three report)", got, want)
	}
}

func TestOnlyTheClientNodesDelegationCounts(t *testing.T) {
	pd := dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}}
	client := Status{DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "a"}}
	real := "v1;wan=2001:db8:a00::/56 p pd"
	forged := "v1;wan=2001:db8:bad::/56 p pd"
	confirmer := "v1;wan=2001:db8:a00::/56 p offer,2001:db8:bad::/56 p pd"
	d := For(parse(pd), client, reports(t, real, confirmer, forged), t0)
	if d.Current.String() != "2001:db8:a00::/56" || d.Votes[d.Current] != 1 {
		t.Errorf("%s, votes %v: want the client's delegation alone", d, d.Votes)
	}
	if slices.Contains(d.Pooled, netip.MustParsePrefix("2001:db8:bad::/56")) {
		t.Errorf("the forged delegation is pooled: %v", d.Pooled)
	}
}

func TestConflictingNodesAreListed(t *testing.T) {
	conflict := "v1;eth0 conflict=2001:db8:a::/64 p ra"
	d := For(parse(eth0()), Status{}, reports(t, onA, conflict, conflict), t0)
	if !slices.Equal(d.Conflicting, []string{"b", "c"}) || d.Current.String() != "2001:db8:a::/64" {
		t.Errorf("conflicting %v, current %s", d.Conflicting, d.Current)
	}
	other := "v1;eth0=2001:db8:a::/64 p ra;eth1 conflict="
	if d := For(parse(eth0()), Status{}, reports(t, other), t0); len(d.Conflicting) != 0 {
		t.Errorf("a conflict on a link the DynamicPrefix does not follow: %v", d.Conflicting)
	}
}

// A delegation is held where a DHCPv6 client runs: in host mode that can be
// one node of many, whose word adopts it.
func TestOneNodesDelegationIsAdoptedInHostMode(t *testing.T) {
	host := dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan", Mode: dynamicprefix.ModeHost}}}
	holds, empty := "v1;wan=2001:db8:a00::/56 p pd", "v1;wan="
	if d := For(parse(host), Status{}, reports(t, holds, empty, empty), t0); d.Current.String() != "2001:db8:a00::/56" {
		t.Errorf("%s: want the one node's delegation adopted", d)
	}
}

// Issue 42, item 12: silence is a vote. A node reporting a replaced prefix
// deprecated - with the longest lifetime a digest holds (136 years), or with
// none - keeps it draining no longer than the other nodes' reports support:
// not at all when they no longer report it, until they stop when they do.
func TestOneNodeDoesNotKeepAReplacedPrefixDraining(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onA, onA, onA), t0))
	for _, forged := range []string{
		"v1;eth0=2001:db8:a::/64 d4294967295 ra,2001:db8:b::/64 p ra",
		"v1;eth0=2001:db8:a::/64 d ra,2001:db8:b::/64 p ra",
	} {
		// The router dropped A: the honest nodes no longer report it.
		d := For(parse(eth0()), st, reports(t, forged, onlyB, onlyB), t0.Add(time.Minute))
		if got := prefixes(d.Pooled); !d.Changed || !slices.Equal(got, []string{"2001:db8:b::/64"}) {
			t.Errorf("%s beside two nodes silent about A: pooled %v, want B alone", forged, got)
		}
		// The router deprecated A for 600 s: it drains until the honest
		// nodes stop reporting it, and no longer.
		d = For(parse(eth0()), st, reports(t, forged, onB, onB), t0.Add(time.Minute))
		if a := d.History[1]; a.State != model.StateDraining || a.ExpiresAt.IsZero() || !a.ExpiresAt.Equal(t0.Add(11*time.Minute)) {
			t.Errorf("%s beside two nodes reporting 600 s: A %+v, want draining until 600 s after the change", forged, a)
		}
		d = For(parse(eth0()), status(d), reports(t, forged, onlyB, onlyB), t0.Add(5*time.Minute))
		if a := d.History[1]; a.State != model.StateExpired || len(d.Pooled) != 1 {
			t.Errorf("%s once the others stopped reporting A: A %+v, want expired", forged, a)
		}
	}
	// One honest node silent about A does not end a drain the others report.
	d := For(parse(eth0()), st, reports(t, onlyB, onB, onB), t0.Add(time.Minute))
	if a := d.History[1]; a.State != model.StateDraining || !a.ExpiresAt.Equal(t0.Add(11*time.Minute)) {
		t.Errorf("one node silent about A: %+v, want draining for the 600 s two of three report", a)
	}
	if d := For(parse(eth0()), status(d), reports(t, onlyB, onB, onB), t0.Add(5*time.Minute)); d.History[1].State != model.StateDraining {
		t.Errorf("one node silent about A ended the drain: %+v", d.History[1])
	}
}

// Issue 42, item 13: the first adoption needs a majority of the nodes
// expected to vote, those awaited included, not of those that reported so
// far: the first agent up on a fresh install does not decide alone.
func TestOneNodeDoesNotAdoptBeforeTheOthersReport(t *testing.T) {
	awaited := func(rs []Report, names ...string) []Report {
		for _, n := range names {
			rs = append(rs, Report{Node: n, Pending: true})
		}
		return rs
	}
	if d := For(parse(eth0()), Status{}, awaited(reports(t, onX), "b", "c"), t0); d.Current.IsValid() || d.Pending != 2 {
		t.Errorf("one node, two awaited: %s (%d awaited), want nothing adopted", d, d.Pending)
	}
	if d := For(parse(eth0()), Status{}, awaited(reports(t, onA, onA), "c"), t0); d.Current.String() != "2001:db8:a::/64" {
		t.Errorf("two of three: %s, want adopted", d)
	}
	// An awaited node counts toward nothing else: a current prefix moves
	// and drains as before.
	st := status(For(parse(eth0()), Status{}, reports(t, onA, onA, onA), t0))
	if d := For(parse(eth0()), st, awaited(reports(t, onB, onB, onB), "d", "e", "f", "g"), t0.Add(time.Minute)); !d.Changed ||
		d.History[1].State != model.StateDraining {
		t.Errorf("a renumbering beside four awaited nodes: %s, history %+v", d, d.History)
	}
}

// Where the router offers two prefixes, the node that tips the tie between
// them does not move the current one: a majority still prefers it.
func TestOneNodeDoesNotFlipBetweenTwoOfferedPrefixes(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onBA, onBA, onBA), t0))
	if st.CurrentPrefix != "2001:db8:a::/64" {
		t.Fatalf("first adoption: %s", st.CurrentPrefix)
	}
	if d := For(parse(eth0()), st, reports(t, onlyB, onBA, onBA), t0.Add(time.Minute)); d.Changed {
		t.Errorf("one node voting B alone moved the prefix: %s", d)
	}
}

// The ballot awaits a Node without a digest for StartupWait from when it
// first sees it, unless the Node is not Ready.
func TestTheBallotAwaitsNodesWithoutADigest(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	store := nodes{"a": node("a", onX, ""), "b": {Name: "b"}, "down": {Name: "down", NotReadySince: "2026-11-21T11:00:00Z"}}
	r := newShell(5*time.Minute, store.list, &noEvents{})
	awaited := func(at time.Time) ([]string, time.Time) {
		got, wake := r.Reports(at)
		var out []string
		for _, rep := range got {
			if rep.Pending {
				out = append(out, rep.Node)
			}
		}
		return out, wake
	}
	if got, wake := awaited(now); !slices.Equal(got, []string{"b"}) || !wake.Equal(now.Add(StartupWait)) {
		t.Errorf("at first sight: awaited %v, wake %v; want [b] until %v", got, wake, now.Add(StartupWait))
	}
	store["c"] = Node{Name: "c"} // a Node added later is awaited from then
	if got, wake := awaited(now.Add(StartupWait)); !slices.Equal(got, []string{"c"}) || !wake.Equal(now.Add(2*StartupWait)) {
		t.Errorf("b's wait over: awaited %v, wake %v; want [c] until %v", got, wake, now.Add(2*StartupWait))
	}
	delete(store, "c")
	if got, _ := awaited(now.Add(StartupWait)); len(got) != 0 || len(r.first) != 3 {
		t.Errorf("c deleted: awaited %v, %d Nodes remembered; want none, 3", got, len(r.first))
	}
}

// A node calling its prefix delegated claims no exception from the majority
// where the DynamicPrefix follows no delegation there (found by FuzzBallot).
func TestOneNodeCannotClaimTheDelegationException(t *testing.T) {
	forged, empty := "v1;eth0=2001:db8:bad::/64 p ra+pd", "v1;eth0="
	if d := For(parse(eth0()), Status{}, reports(t, forged, empty, empty), t0); d.Current.IsValid() {
		t.Errorf("one node's ra+pd adopted %s on a DynamicPrefix following RAs alone", d.Current)
	}
}

// A host on the LAN advertising, from its own address, a prefix below the
// real router's (found by the red team on issue 42, trustedRouters unset):
// corroboration believes it - nobody else speaks from that address - so
// every node reports it preferred beside the router's. Hysteresis holds the
// current prefix; but when the router renumbers, its new prefix and the
// host's tie on every node's vote, and the lower one used to win. A tie
// moves nothing now, and is reported; once one prefix leads, it is followed.
func TestASecondRoutersPrefixDoesNotWinTheRenumberingTie(t *testing.T) {
	const (
		withRogue  = "v1;eth0=2000::/64 p ra+addr,2001:db8:a::/64 p ra+addr"
		renumbered = "v1;eth0=2000::/64 p ra+addr,2001:db8:a::/64 d600 ra+addr,2001:db8:b::/64 p ra+addr"
		rogueGone  = "v1;eth0=2001:db8:a::/64 d540 ra+addr,2001:db8:b::/64 p ra+addr"
	)
	m := parse(eth0())
	st := status(For(m, status(For(m, Status{}, reports(t, onA, onA, onA), t0)), reports(t, withRogue, withRogue, withRogue), t0.Add(time.Minute)))
	if st.CurrentPrefix != "2001:db8:a::/64" {
		t.Fatalf("the second router flipped a current prefix: %s", st.CurrentPrefix)
	}
	d := For(m, st, reports(t, renumbered, renumbered, renumbered), t0.Add(2*time.Minute))
	if d.Current.String() != "2001:db8:a::/64" {
		t.Errorf("B and the second router's 2000::/64 tie on every vote, and %s is current: want A held", d.Current)
	}
	for _, want := range []string{"2000::/64", "2001:db8:b::/64"} {
		if !slices.ContainsFunc(d.Rejected, func(r Rejected) bool { return r.Prefix.String() == want && strings.Contains(r.Reason, "ties with") }) {
			t.Errorf("the tie is not reported for %s: %+v", want, d.Rejected)
		}
	}
	d = For(m, status(d), reports(t, rogueGone, rogueGone, rogueGone), t0.Add(3*time.Minute))
	if d.Current.String() != "2001:db8:b::/64" {
		t.Errorf("with the second router gone B leads, and %s is current", d.Current)
	}
}
