package decide

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
)

// One node's digest is anyone's who can patch that Node: it decides nothing
// alone (lessons.md, "A hostile LAN").

const onX = "v1;eth0=2001:db8:bad::/64 p ra"

func TestOneNodeDoesNotAdoptTheFirstPrefix(t *testing.T) {
	empty := "v1;eth0="
	if d := For(model(eth0()), api.Status{}, reports(t, onX, empty, empty), t0); d.Current.IsValid() {
		t.Errorf("one node of three adopted %s", d.Current)
	}
	if d := For(model(eth0()), api.Status{}, reports(t, onX, onX, empty), t0); d.Current.String() != "2001:db8:bad::/64" {
		t.Errorf("two of three: %s, want adopted", d)
	}
	if d := For(model(eth0()), api.Status{}, reports(t, onX), t0); !d.Current.IsValid() {
		t.Errorf("a one-node cluster's only node: %s, want adopted", d)
	}
}

func TestOneNodeDoesNotMoveACurrentPrefixNobodyPrefers(t *testing.T) {
	st := status(For(model(eth0()), api.Status{}, reports(t, onA, onA, onA), t0))
	// The router went quiet and A is deprecated everywhere; one node says X.
	deprecated := "v1;eth0=2001:db8:a::/64 d600 ra"
	hostile := "v1;eth0=2001:db8:a::/64 d600 ra,2001:db8:bad::/64 p ra"
	if d := For(model(eth0()), st, reports(t, hostile, deprecated, deprecated), t0.Add(time.Hour)); d.Changed {
		t.Errorf("one node moved a current prefix nobody prefers: %s", d)
	}
	if d := For(model(eth0()), st, reports(t, hostile, hostile, deprecated), t0.Add(time.Hour)); !d.Changed {
		t.Errorf("a majority did not: %s", d)
	}
}

func TestAReplacedPrefixDrainsForWhatTheMajorityReports(t *testing.T) {
	st := status(For(model(eth0()), api.Status{}, reports(t, onA, onA, onA), t0))
	huge := "v1;eth0=2001:db8:a::/64 d4294967295 ra,2001:db8:b::/64 p ra"
	d := For(model(eth0()), st, reports(t, huge, onB, onB), t0.Add(time.Minute))
	if !d.Changed || len(d.History) != 2 || d.History[1].ExpiresAt == nil {
		t.Fatalf("history %+v", d.History)
	}
	if got, want := d.History[1].ExpiresAt.Time, t0.Add(time.Minute+600*time.Second); !got.Equal(want) {
		t.Errorf("A drains until %s, want %s (600 s, what two of three report)", got, want)
	}
}

func TestOnlyTheClientNodesDelegationCounts(t *testing.T) {
	pd := dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}}
	client := api.Status{DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "a"}}
	real := "v1;wan=2001:db8:a00::/56 p pd"
	forged := "v1;wan=2001:db8:bad::/56 p pd"
	d := For(model(pd), client, reports(t, real, forged, forged), t0)
	if d.Current.String() != "2001:db8:a00::/56" || d.Votes[d.Current] != 1 {
		t.Errorf("%s, votes %v: want the client's delegation alone", d, d.Votes)
	}
	if slices.Contains(d.Pooled, netip.MustParsePrefix("2001:db8:bad::/56")) {
		t.Errorf("the forged delegation is pooled: %v", d.Pooled)
	}
}

func TestConflictingNodesAreListed(t *testing.T) {
	conflict := "v1;eth0 conflict=2001:db8:a::/64 p ra"
	d := For(model(eth0()), api.Status{}, reports(t, onA, conflict, conflict), t0)
	if !slices.Equal(d.Conflicting, []string{"b", "c"}) || d.Current.String() != "2001:db8:a::/64" {
		t.Errorf("conflicting %v, current %s", d.Conflicting, d.Current)
	}
	other := "v1;eth0=2001:db8:a::/64 p ra;eth1 conflict="
	if d := For(model(eth0()), api.Status{}, reports(t, other), t0); len(d.Conflicting) != 0 {
		t.Errorf("a conflict on a link the DynamicPrefix does not follow: %v", d.Conflicting)
	}
}

// A delegation is held where a DHCPv6 client runs: in host mode that can be
// one node of many, whose word adopts it.
func TestOneNodesDelegationIsAdoptedInHostMode(t *testing.T) {
	host := dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan", Mode: dynamicprefix.ModeHost}}}
	holds, empty := "v1;wan=2001:db8:a00::/56 p pd", "v1;wan="
	if d := For(model(host), api.Status{}, reports(t, holds, empty, empty), t0); d.Current.String() != "2001:db8:a00::/56" {
		t.Errorf("%s: want the one node's delegation adopted", d)
	}
}
