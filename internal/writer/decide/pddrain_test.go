package decide

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// A replaced delegation drains no longer than the server stated (issue 42,
// "One node"): the deadline frozen at the renumbering is the client's word
// capped by the valid lifetime a confirmer heard the server state for it
// while it was current (status.dhcpv6pd.validLifetime). The client alone
// votes on a delegation's drain and the confirmer is offered only the
// server's present binding, so before the cap a liar named client kept the
// old delegation pooled as long as it said - 136 years (a red team's decide
// scratch test: still pooled 30 days on).
func TestAReplacedDelegationDrainsNoLongerThanTheServerStated(t *testing.T) {
	m := wanPD()
	const (
		old      = "2001:db8:a00::/56"
		renumber = "2001:db8:b00::/56 p pd"
		offeredB = "v1;wan=2001:db8:b00::/56 p1800 offer"
	)
	for _, c := range []struct {
		name   string
		stated int64  // status.dhcpv6pd.validLifetime before the renumbering
		client string // the client's digest
		want   time.Duration
	}{
		{"the client says 2^32-1 s are left", 3600, "v1;wan=2001:db8:a00::/56 d4294967295 pd," + renumber, time.Hour},
		{"the client names no lifetime", 3600, "v1;wan=2001:db8:a00::/56 d pd," + renumber, time.Hour},
		{"the client says less: its word", 3600, "v1;wan=2001:db8:a00::/56 d600 pd," + renumber, 10 * time.Minute},
		// Nothing heard (agents before the offer's lifetime, or every
		// statement infinite): the client's word, as before.
		{"no confirmer stated one", 0, "v1;wan=2001:db8:a00::/56 d7200 pd," + renumber, 2 * time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			prev := Status{CurrentPrefix: old, PrefixSource: "dhcpv6-pd",
				DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "a", ConfirmerNode: "b", ValidLifetime: c.stated}}
			r := reports(t, c.client, offeredB, "v1;wan=")
			d := For(m, prev, r, t0)
			if d.Current.String() != "2001:db8:b00::/56" {
				t.Fatalf("current %v, want the renumbering adopted", d.Current)
			}
			var exp time.Time
			for _, h := range d.History {
				if h.Prefix == old {
					exp = h.ExpiresAt
				}
			}
			if exp.IsZero() || exp.Sub(t0) != c.want {
				t.Fatalf("%s drains until %v, want t0+%v (history %+v)", old, exp, c.want, d.History)
			}
			// Past the deadline it leaves the pools, whatever the client
			// still says.
			later := For(m, pdStatus(d), r, t0.Add(c.want))
			if len(later.Pooled) != 1 {
				t.Errorf("at t0+%v pooled %v, want the renumbering alone", c.want, later.Pooled)
			}
		})
	}
}

// status.dhcpv6pd.validLifetime is the shortest finite lifetime the
// confirmer heard for the current prefix since it became current: a longer
// or infinite statement does not raise it, the client's word never enters
// it, and a renumbering starts it again from the new delegation's offer.
func TestTheStatusKeepsTheShortestLifetimeAConfirmerHeard(t *testing.T) {
	m := wanPD()
	const (
		holdsA = "v1;wan=2001:db8:a00::/56 p pd"
		holdsB = "v1;wan=2001:db8:a00::/56 d3000 pd,2001:db8:b00::/56 p pd"
	)
	st := Status{CurrentPrefix: "2001:db8:a00::/56", PrefixSource: "dhcpv6-pd",
		DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "a", ConfirmerNode: "b"}}
	for i, step := range []struct {
		name, client, confirmer string
		want                    int64
	}{
		{"an agent before the lifetime states none", holdsA, "v1;wan=2001:db8:a00::/56 p offer", 0},
		{"the confirmer hears an hour", holdsA, "v1;wan=2001:db8:a00::/56 p3600 offer", 3600},
		{"then ten minutes", holdsA, "v1;wan=2001:db8:a00::/56 p600 offer", 600},
		{"a longer one does not raise it", holdsA, "v1;wan=2001:db8:a00::/56 p7200 offer", 600},
		{"an infinite one bounds nothing", holdsA, "v1;wan=2001:db8:a00::/56 p4294967295 offer", 600},
		{"an offer of another prefix is not about this one", holdsA, "v1;wan=2001:db8:b00::/56 p60 offer", 600},
		{"the renumbering starts again from the new offer", holdsB, "v1;wan=2001:db8:b00::/56 p1800 offer", 1800},
	} {
		d := For(m, st, reports(t, step.client, step.confirmer, "v1;wan="), t0.Add(time.Duration(i)*time.Second))
		next := pdStatus(d)
		if diff := cmp.Diff(step.want, next.DHCPv6PD.ValidLifetime); diff != "" {
			t.Fatalf("%s: validLifetime (-want +got):\n%s", step.name, diff)
		}
		if step.client == holdsB {
			// Frozen from what was stated for the old one (600 s), not
			// the client's 3000 s, counted from when the confirmer was
			// first offered another (the step before: since).
			since, _ := time.Parse(time.RFC3339, st.DHCPv6PD.Since)
			for _, h := range d.History {
				if h.Prefix == "2001:db8:a00::/56" && (h.ExpiresAt.IsZero() || !h.ExpiresAt.Equal(since.Add(10*time.Minute))) {
					t.Errorf("%s: the old delegation drains %+v, want 10 minutes from %v", step.name, h, since)
				}
			}
		}
		st = next
	}
}

// A replaced delegation's cap counts from the first pass anyone with a role
// said the server moved on (status.dhcpv6pd.otherOffered), not from the
// transition: here the honest client a holds the renumbering from t0, the
// liar confirmer b keeps offering the old delegation until the rotation
// names c (past ConfirmWithin), which is offered the new one alike. The
// server's last word on the old one ended by t0 + 10 min; counted from the
// transition it drained until t0+3m+10m.
func TestAStaleConfirmerDelaysNoReplacedDelegationsCap(t *testing.T) {
	m := wanPD()
	const old = "2001:db8:a00::/56"
	st := Status{CurrentPrefix: old, PrefixSource: "dhcpv6-pd",
		DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "a", ConfirmerNode: "b", ValidLifetime: 600}}
	r := reports(t, "v1;wan=2001:db8:a00::/56 d4294967295 pd,2001:db8:b00::/56 p pd",
		"v1;wan=2001:db8:a00::/56 p600 offer", "v1;wan=2001:db8:b00::/56 p600 offer")
	var exp time.Time
	for at := time.Duration(0); at <= 5*time.Minute && exp.IsZero(); at += 30 * time.Second {
		d := For(m, st, r, t0.Add(at))
		st = pdStatus(d)
		for _, h := range d.History {
			if h.Prefix == old && !h.ExpiresAt.IsZero() {
				exp = h.ExpiresAt
			}
		}
	}
	if want := t0.Add(10 * time.Minute); !exp.Equal(want) {
		t.Errorf("%s drains until %v, want %v (status %+v)", old, exp, want, *st.DHCPv6PD)
	}
}
