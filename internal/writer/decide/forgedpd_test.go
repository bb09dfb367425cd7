package decide

import (
	"cmp"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
)

// A stolen writer token writes status.dhcpv6pd, the ballot's memory of the
// agents' DHCPv6 client (confirm.go), and renumber-writer-status cannot
// check most of it: CEL reads neither the Nodes nor the clock. What each
// forged field does, with every node honest, and where decide distrusts it:
//
//   - clientNode, confirmerNode: a role named is kept while its node is
//     eligible; an honest node in either role confirms only the server's
//     binding (the next test). Costs a client move or a rotation.
//   - unconfirmed, backing, backedAgainst, backingKept: move a takeover
//     one bound earlier or later; what the honest nodes say decides whose
//     word counts. Costs a rotation (the next test).
//   - since: the start of the bound. In the past: a rotation at once. In
//     the future: no rotation for as long as it says - a stall, unseen
//     (TestAForgedSinceInTheFutureHoldsNoRotationBack).
//   - unconfirmedSince: with trustClientAfter, far in the past it trusts
//     the client's word at once (TestAForgedUnconfirmedSinceTrustsNoSooner).
//   - validLifetime, otherOffered: the deadline of the next replaced
//     delegation (from + validLifetime); an otherOffered before the
//     current prefix was acquired ends its drain at the renumbering
//     (TestAForgedOtherOfferedCutsNoDrainShort). A low validLifetime cannot
//     be told from a server that lowered its lifetime ahead of a
//     renumbering: it ends the next drain early, as `state: expired` ends
//     one now (TestAForgedValidLifetimeEndsADrainEarlyAndExtendsNone).

// pdAt is a status with current A, client a and confirmer b, agreeing.
func pdAt(pd dynamicprefix.DHCPv6PDStatus) Status {
	pd.ClientNode, pd.ConfirmerNode = cmp.Or(pd.ClientNode, "a"), cmp.Or(pd.ConfirmerNode, "b")
	return Status{CurrentPrefix: trustCurrent, PrefixSource: "dhcpv6-pd", DHCPv6PD: &pd,
		History: []HistoryEntry{{Prefix: trustCurrent, State: model.StateActive, AcquiredAt: t0.Add(-24 * time.Hour)}}}
}

// feedBack runs the writer from st every step for until over r, the status
// fed back; it returns every decision.
func feedBack(t *testing.T, m model.Model, st Status, r []Report, step, until time.Duration) []Decision {
	t.Helper()
	var out []Decision
	for at := time.Duration(0); at <= until; at += step {
		d := For(m, st, r, t0.Add(at))
		out = append(out, d)
		st = stored(t, st, pdStatus(d))
	}
	return out
}

// With every node honest - the client a still holding A until it renews,
// the confirmer b and the third node c offered the server's renumbering B -
// no forged role or backing makes anything but A or B current over ten
// bounds: what it changes is who holds which role, and when they rotate.
func TestAForgedRoleOrBackingMakesNoOtherPrefixCurrent(t *testing.T) {
	const offeredB = "v1;wan=2001:db8:b00::/56 p offer"
	r := reports(t, heldA, offeredB, offeredB)
	for _, c := range []struct {
		name string
		pd   dynamicprefix.DHCPv6PDStatus
	}{
		{"nothing forged", dynamicprefix.DHCPv6PDStatus{}},
		{"backing a forgery", dynamicprefix.DHCPv6PDStatus{Backing: "2001:db8:bad::/56", BackedAgainst: trustCurrent, BackingKept: true}},
		{"backing the renumbering", dynamicprefix.DHCPv6PDStatus{Backing: "2001:db8:b00::/56", BackingKept: true}},
		{"unconfirmed a forgery", dynamicprefix.DHCPv6PDStatus{Unconfirmed: "2001:db8:bad::/56", Since: t0.Format(time.RFC3339)}},
		{"since long past", dynamicprefix.DHCPv6PDStatus{Since: "2000-01-01T00:00:00Z"}},
		{"the client named c", dynamicprefix.DHCPv6PDStatus{ClientNode: "c"}},
		{"the confirmer named c", dynamicprefix.DHCPv6PDStatus{ConfirmerNode: "c"}},
		{"the client and the confirmer one node", dynamicprefix.DHCPv6PDStatus{ClientNode: "b", ConfirmerNode: "b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i, d := range feedBack(t, wanPD(), pdAt(c.pd), r, 10*time.Second, 10*ConfirmWithin) {
				if s := d.Current.String(); s != trustCurrent && s != "2001:db8:b00::/56" {
					t.Fatalf("pass %d: current %s", i, s)
				}
			}
		})
	}
}

// since, the start of the bound past which the roles rotate, forged in the
// future: the same pair disagreeing (the client a not yet renewed, the
// confirmer b offered the server's renumbering) never rotated, the wake
// was set for 9999 and the stall was not the one StallsAt reports. A since
// after now is read as now and written back, so the roles rotate a bound
// later.
func TestAForgedSinceInTheFutureHoldsNoRotationBack(t *testing.T) {
	r := reports(t, heldA, "v1;wan=2001:db8:b00::/56 p offer", silent)
	st := pdAt(dynamicprefix.DHCPv6PDStatus{Unconfirmed: trustCurrent, Since: forever.Format(time.RFC3339)})
	rotated := time.Duration(-1)
	for i, d := range feedBack(t, wanPD(), st, r, 10*time.Second, 3*ConfirmWithin) {
		if d.Confirm.Confirmer != "b" && rotated < 0 {
			rotated = time.Duration(i) * 10 * time.Second
		}
	}
	if rotated < 0 || rotated > ConfirmWithin {
		t.Errorf("with since %s the confirmer b rotated after %v, want within %v", forever.Format(time.RFC3339), rotated, ConfirmWithin)
	}
}

// unconfirmedSince, the start of a trustClientAfter episode, forged far in
// the past: the honest client's word, contradicted by every confirmer (a
// LAN host answering their Solicits), counted at once - and so would a
// liar client's, or a LAN host's forged Reply to an honest one. It is
// believed no earlier than the client's digest as the writer first saw it
// (Report.Since): the token's value starts nothing before the writer heard
// the claim.
func TestAForgedUnconfirmedSinceTrustsNoSooner(t *testing.T) {
	r := reports(t, heldB, silent, silent)
	for i := range r {
		r[i].Since = t0
	}
	st := pdAt(dynamicprefix.DHCPv6PDStatus{UnconfirmedSince: "2000-01-01T00:00:00Z"})
	var moved time.Time
	for i, d := range feedBack(t, trusting("30m"), st, r, 30*time.Second, time.Hour) {
		if moved.IsZero() && d.Current.String() != trustCurrent {
			moved = t0.Add(time.Duration(i) * 30 * time.Second)
		}
	}
	if want := t0.Add(30 * time.Minute); !moved.Equal(want) {
		t.Errorf("with unconfirmedSince 2000-01-01 the client's word counted at %v, want %v (30m after the writer first saw it)", moved, want)
	}
}

// otherOffered, with validLifetime the anchor of a replaced delegation's
// cap, forged long before the current prefix was acquired: the honest
// renumbering's drain (the server stated 1 h, and moved on at t0) ended at
// the transition. The writer sets it only while the prefix is current, so
// one older than the current entry's acquiredAt is not believed: the cap
// counts from the transition, as with none.
func TestAForgedOtherOfferedCutsNoDrainShort(t *testing.T) {
	const old = trustCurrent
	st := pdAt(dynamicprefix.DHCPv6PDStatus{ValidLifetime: 3600, OtherOffered: "2000-01-01T00:00:00Z"})
	// The client renewed into B, the old one deprecated; b and c offered B.
	r := reports(t, "v1;wan=2001:db8:a00::/56 d3600 pd,2001:db8:b00::/56 p pd",
		"v1;wan=2001:db8:b00::/56 p3600 offer", "v1;wan=2001:db8:b00::/56 p3600 offer")
	d := For(wanPD(), st, r, t0)
	if d.Current.String() != "2001:db8:b00::/56" {
		t.Fatalf("current %s, want the renumbering", d.Current)
	}
	for _, h := range d.History {
		if h.Prefix == old && (h.State != model.StateDraining || !h.ExpiresAt.Equal(t0.Add(time.Hour))) {
			t.Errorf("%s: %+v, want draining until %v", old, h, t0.Add(time.Hour))
		}
	}
}

// validLifetime, the shortest valid lifetime a confirmer heard for the
// current prefix, caps a replaced delegation's drain whatever the client
// says is left of it. Forged, with the client honest (the old delegation
// deprecated with the hour the server stated left): a low one ends the
// drain early - what remains, since nothing the writer reads tells it from
// a server that lowered its lifetime ahead of a renumbering (the token
// ends a drain outright with state: expired, but only while it holds the
// token); a raised one (renumber-writer-status refuses it while the prefix
// stays current) keeps nothing past the client's word.
func TestAForgedValidLifetimeEndsADrainEarlyAndExtendsNone(t *testing.T) {
	r := reports(t, "v1;wan=2001:db8:a00::/56 d3600 pd,2001:db8:b00::/56 p pd",
		"v1;wan=2001:db8:b00::/56 p3600 offer", "v1;wan=2001:db8:b00::/56 p3600 offer")
	for _, c := range []struct {
		name  string
		valid int64
		want  HistoryEntry
	}{
		{"as the server stated it", 3600, HistoryEntry{State: model.StateDraining, ExpiresAt: t0.Add(time.Hour)}},
		{"1 s", 1, HistoryEntry{State: model.StateDraining, ExpiresAt: t0.Add(time.Second)}},
		{"raised to 2^31 s", 1 << 31, HistoryEntry{State: model.StateDraining, ExpiresAt: t0.Add(time.Hour)}},
	} {
		d := For(wanPD(), pdAt(dynamicprefix.DHCPv6PDStatus{ValidLifetime: c.valid}), r, t0)
		for _, h := range d.History {
			if h.Prefix == trustCurrent && (h.State != c.want.State || !h.ExpiresAt.Equal(c.want.ExpiresAt)) {
				t.Errorf("validLifetime %s: %s %s until %v, want %s until %v", c.name, h.Prefix, h.State, h.ExpiresAt, c.want.State, c.want.ExpiresAt)
			}
		}
	}
}
