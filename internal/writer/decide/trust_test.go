package decide

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
)

// spec.acquisition.dhcpv6pd.trustClientAfter, the bound the user may set on
// a stall no rotation settles: once the client has held a delegation other
// than the current prefix, unconfirmed, that long, its word counts alone.

const (
	trustCurrent = "2001:db8:a00::/56"
	heldA        = "v1;wan=2001:db8:a00::/56 p pd"
	heldB        = "v1;wan=2001:db8:b00::/56 p pd"
	heldZ        = "v1;wan=2001:db8:bad::/56 p pd"
	offeredA     = "v1;wan=2001:db8:a00::/56 p offer"
	offeredZ     = "v1;wan=2001:db8:bad::/56 p offer"
	silent       = "v1;wan="
)

func trusting(after string) model.Model {
	return parse(dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan", TrustClientAfter: after}}})
}

// run passes the writer every step from t0 to t0+until over digests (nodes
// a, b, c...), the status fed back as the API server keeps it, starting
// with client a and confirmer b agreeing on the current prefix. It returns
// when the current prefix first changed (zero: never) and the last status.
func run(t *testing.T, m model.Model, digests []string, step, until time.Duration) (time.Time, Status) {
	t.Helper()
	st := Status{CurrentPrefix: trustCurrent, PrefixSource: "dhcpv6-pd", DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "a", ConfirmerNode: "b"}}
	r := reports(t, digests...)
	var moved time.Time
	for at := time.Duration(0); at <= until; at += step {
		d := For(m, st, r, t0.Add(at))
		if moved.IsZero() && d.Current.String() != trustCurrent {
			moved = t0.Add(at)
		}
		st = stored(t, st, pdStatus(d))
	}
	return moved, st
}

// A LAN host contradicts every confirmer's Solicit (each is offered
// nothing) while the honest client holds the server's renumbering: with
// three nodes the confirmers rotate for ever. By default nothing moves
// (the stall is reported, and waits for the admin); with trustClientAfter
// 30m the renumbering lands on the first pass past 30 minutes, the
// anchor kept through every rotation.
func TestTrustClientAfterLandsARenumberingNoConfirmerConfirms(t *testing.T) {
	digests := []string{heldB, silent, silent}
	if moved, st := run(t, trusting(""), digests, 30*time.Second, 3*time.Hour); !moved.IsZero() || st.DHCPv6PD.UnconfirmedSince != "" {
		t.Errorf("by default: current moved at %v, status %+v; want nothing moved and no anchor kept", moved, st.DHCPv6PD)
	}
	moved, st := run(t, trusting("30m"), digests, 30*time.Second, time.Hour)
	if want := t0.Add(30 * time.Minute); !moved.Equal(want) {
		t.Errorf("with trustClientAfter 30m the renumbering landed at %v, want %v", moved, want)
	}
	if st.CurrentPrefix != "2001:db8:b00::/56" || st.DHCPv6PD.UnconfirmedSince != t0.Format(time.RFC3339) {
		t.Errorf("after: current %s, status %+v; want 2001:db8:b00::/56, the episode's anchor kept while no confirmer agrees", st.CurrentPrefix, st.DHCPv6PD)
	}
}

// Two eligible nodes, nobody to rotate to: whichever of them lies, the
// client's word counts once the bound passes - the honest client's
// renumbering a liar confirmer denies lands, and so does a liar client's
// forgery an honest confirmer contradicts. That is the price the user
// opts into; by default neither moves.
func TestTrustClientAfterTrustsTheClientOfTwo(t *testing.T) {
	for _, c := range []struct {
		name    string
		digests []string
		want    string
	}{
		{"a liar confirmer denying the renumbering", []string{heldB, offeredA}, "2001:db8:b00::/56"},
		{"a liar client forging one", []string{heldZ, offeredA}, "2001:db8:bad::/56"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if moved, _ := run(t, trusting(""), c.digests, time.Minute, 3*time.Hour); !moved.IsZero() {
				t.Errorf("by default the current prefix moved at %v", moved)
			}
			moved, st := run(t, trusting("1h"), c.digests, time.Minute, 2*time.Hour)
			if want := t0.Add(time.Hour); !moved.Equal(want) || st.CurrentPrefix != c.want {
				t.Errorf("with trustClientAfter 1h: %s from %v, want %s from %v", st.CurrentPrefix, moved, c.want, want)
			}
		})
	}
}

// The bound trusts the client, never a confirmer: a liar confirmer offered
// a forgery while the client holds the current prefix sets no anchor.
func TestTrustClientAfterNeverTrustsAConfirmer(t *testing.T) {
	moved, st := run(t, trusting("1m"), []string{heldA, offeredZ}, time.Minute, 2*time.Hour)
	if !moved.IsZero() || st.DHCPv6PD.UnconfirmedSince != "" {
		t.Errorf("current moved at %v, status %+v", moved, st.DHCPv6PD)
	}
}

// The decision asks to be woken when the bound passes, so that the
// renumbering lands then and not at the next unrelated pass.
func TestTrustClientAfterWakesTheWriterWhenTheBoundPasses(t *testing.T) {
	m := trusting("45m")
	st := Status{CurrentPrefix: trustCurrent, PrefixSource: "dhcpv6-pd", DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "a", ConfirmerNode: "b"}}
	r := reports(t, heldB, offeredA)
	st = stored(t, st, pdStatus(For(m, st, r, t0)))
	if got := st.DHCPv6PD.UnconfirmedSince; got != t0.Format(time.RFC3339) {
		t.Fatalf("unconfirmedSince %q, want %s", got, t0.Format(time.RFC3339))
	}
	d := For(m, st, r, t0.Add(10*time.Minute))
	if want := t0.Add(45 * time.Minute); d.Wake.After(want) {
		t.Errorf("wake at %v, after the bound %v", d.Wake, want)
	}
	if d := For(m, st, r, t0.Add(45*time.Minute)); d.Current.String() != "2001:db8:b00::/56" || d.Confirm.Trusted.IsZero() {
		t.Errorf("at the bound: current %s, trusted %v", d.Current, d.Confirm.Trusted)
	}
}

// The anchor belongs to the client: when the role moves to another node
// (the client stopped voting, here; or two confirmers backed an offer it
// did not hold), it starts again, so a node taking the role over inherits
// no time another node waited. And a
// client flapping its claim within the episode writes nothing: the anchor
// does not follow the claim.
func TestTrustClientAftersAnchorIsTheClients(t *testing.T) {
	m := trusting("1h")
	since := t0.Add(-50 * time.Minute).Format(time.RFC3339)
	st := Status{CurrentPrefix: trustCurrent, PrefixSource: "dhcpv6-pd",
		DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "c", ConfirmerNode: "b", UnconfirmedSince: since}}
	d := For(m, st, reports(t, silent, silent, heldB), t0)
	if got := pdStatus(d).DHCPv6PD.UnconfirmedSince; got != since {
		t.Errorf("the same client: unconfirmedSince %q, want %s kept", got, since)
	}
	d = For(m, st, reports(t, heldB, silent), t0) // c votes no more
	if got := pdStatus(d).DHCPv6PD; d.PDClient == "c" || got.UnconfirmedSince != t0.Format(time.RFC3339) {
		t.Errorf("another client: %+v, want the anchor started again at %s", got, t0.Format(time.RFC3339))
	}
	first := stored(t, st, pdStatus(d))
	for i, claim := range []string{heldZ, heldB, heldZ} {
		again := stored(t, first, pdStatus(For(m, first, reports(t, claim, silent, silent), t0.Add(time.Duration(i+1)*time.Second))))
		if again.DHCPv6PD.UnconfirmedSince != first.DHCPv6PD.UnconfirmedSince || again.DHCPv6PD.Since != first.DHCPv6PD.Since {
			t.Errorf("claim %d: status %+v, want %+v kept", i, again.DHCPv6PD, first.DHCPv6PD)
		}
	}
}
