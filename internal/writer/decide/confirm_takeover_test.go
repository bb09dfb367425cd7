package decide

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// Red team (d83b422): the server renumbers A -> B; the honest client a has
// not renewed yet, the honest confirmer b is offered B for a bound and is
// replaced by c, b's offer kept as the backing. Then a renews and holds B -
// what b backed - while c, a liar, offers anything else (here a forged
// prefix). Past c's own bound c takes the client over: "two nodes besides
// the client each contradicted it for a bound", but the first no longer
// does (a holds what it backed), and the only node contradicting the client
// is the liar. Before d83b422 a confirmer took over only offered the backing,
// which a now holds (they agree): the liar could not. FuzzBallot found it
// (16m10s into input 80ab767168696b11) with a check that the liar never takes
// the client role from a Ready honest client holding the server's live
// binding.
func TestALiarConfirmerDoesNotTakeOverAClientHoldingTheBacking(t *testing.T) {
	m := parse(dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}})
	const (
		current   = "2001:db8:a00::/56"
		realB     = "v1;wan=2001:db8:b00::/56 p pd"
		nothing   = "v1;wan="
		liarOffer = "v1;wan=2001:db8:bad::/56 p offer"
	)
	prev := Status{CurrentPrefix: current, DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{
		ClientNode: "a", ConfirmerNode: "c", Unconfirmed: current,
		Since: t0.UTC().Format(time.RFC3339), Backing: "2001:db8:b00::/56", OtherOffered: t0.UTC().Format(time.RFC3339)}}
	d := For(m, prev, reports(t, realB, nothing, liarOffer), t0.Add(3*time.Minute))
	if d.PDClient != "a" {
		t.Errorf("client %q, want a: it holds the delegation b backed, and only the liar c contradicts it (status %+v)",
			d.PDClient, d.Confirm.Status(d.PDClient))
	}
	// What an honest c would have done at the same pass: confirm B.
	honest := For(m, prev, reports(t, realB, nothing, "v1;wan=2001:db8:b00::/56 p offer"), t0.Add(3*time.Minute))
	if diff := cmp.Diff("2001:db8:b00::/56", honest.Current.String()); diff != "" || honest.PDClient != "a" {
		t.Errorf("with c honest: client %q, current (-want +got):\n%s", honest.PDClient, diff)
	}
}
