package decide

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
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
	m := wanPD()
	const (
		current   = "2001:db8:a00::/56"
		realB     = "v1;wan=2001:db8:b00::/56 p pd"
		nothing   = "v1;wan="
		liarOffer = "v1;wan=2001:db8:bad::/56 p offer"
	)
	prev := Status{CurrentPrefix: current, DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{
		ClientNode: "a", ConfirmerNode: "c", Unconfirmed: current,
		Since: t0.UTC().Format(time.RFC3339), Backing: "2001:db8:b00::/56", BackedAgainst: current, OtherOffered: t0.UTC().Format(time.RFC3339)}}
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

// pass is one writer pass over the digests of nodes a, b, c at t0+at: the
// status it writes is what the next pass reads.
type passes struct {
	t  *testing.T
	m  model.Model
	st Status
}

func (p *passes) pass(at time.Duration, digests ...string) Decision {
	p.t.Helper()
	d := For(p.m, p.st, reports(p.t, digests...), t0.Add(at))
	p.st = pdStatus(d)
	return d
}

// FuzzBallot input b89af4ad46f279f5: a backing is only as fresh as the offer
// it records. The client a holds nothing yet, the confirmer b is offered X
// for a bound and is replaced by c, X kept as the backing. The server moves
// on to Y and a gets Y. c, a liar, echoes the stale X: before, it took the
// client role over from a, which holds the server's live binding - the
// backing was recorded while a held nothing, and a holds something since,
// so the server answered a after it answered b.
func TestAStaleBackingTakesNoClientOver(t *testing.T) {
	const (
		x        = "2001:db8:1000::/56"
		offeredX = "v1;wan=" + x + " p offer"
		holdsY   = "v1;wan=2001:db8:1100::/56 p pd"
		nothing  = "v1;wan="
	)
	p := &passes{t: t, m: wanPD()}
	p.pass(0, nothing, offeredX, offeredX)
	if d := p.pass(ConfirmWithin+time.Second, nothing, offeredX, offeredX); d.PDClient != "a" || p.st.DHCPv6PD.ConfirmerNode != "c" || p.st.DHCPv6PD.Backing != x {
		t.Fatalf("past the bound: client %q, status %+v; want a, c confirming, X backed", d.PDClient, p.st.DHCPv6PD)
	}
	if d := p.pass(ConfirmWithin+2*time.Second, holdsY, nothing, offeredX); d.PDClient != "a" {
		t.Fatalf("the liar c echoing the stale backing took the client over from a, which holds the server's Y since (status %+v)",
			d.Confirm.Status(d.PDClient))
	}
	// b confirms again (c's bound began with b's: it ends at once), and,
	// offered Y as a holds it, agrees.
	if d := p.pass(ConfirmWithin+3*time.Second, holdsY, "v1;wan=2001:db8:1100::/56 p offer", offeredX); d.PDClient != "a" || !d.Confirm.Agree || d.Current.String() != "2001:db8:1100::/56" {
		t.Errorf("b confirming a's Y: client %q, agree %v, current %v (status %+v)", d.PDClient, d.Confirm.Agree, d.Current, p.st.DHCPv6PD)
	}
}

// A liar client changing its claim after each rotation makes every backing
// stale, and must not keep the role for ever so: with three eligible nodes
// it loses it at the second rotation. a, the liar, claims another forged
// delegation at every pass; b and c, honest, are offered B. Past b's bound
// c confirms, B backed against a's first claim, which a no longer makes;
// past c's bound (its offer stale too, but alike) B is kept: no claim
// makes it stale, and b, offered B again, takes the client over. The
// status is written when the disagreement begins, at each rotation and at
// the takeover: never for a claim.
func TestAFlappingLiarClientLosesTheRoleAtTheSecondRotation(t *testing.T) {
	const offeredB = "v1;wan=2001:db8:b00::/56 p offer"
	p := &passes{t: t, m: wanPD(),
		st: Status{CurrentPrefix: "2001:db8:a00::/56"}}
	rotations, confirmer, writes := 0, "", 0
	for i := range 40 {
		at := time.Duration(i) * 10 * time.Second
		claim := fmt.Sprintf("v1;wan=2001:db8:bad%x::/56 p pd", i%16)
		before := p.st
		d := p.pass(at, claim, offeredB, offeredB)
		if !cmp.Equal(before, p.st) {
			writes++
		}
		if d.PDClient != "a" {
			if writes > rotations+2 {
				t.Errorf("%d status writes for %d rotations: a claim changing at every pass wrote the status (want the disagreement's start, each rotation and the takeover)", writes, rotations)
			}
			if rotations > 2 {
				t.Errorf("the liar a lost the client role at %v, after %d rotations; want at most 2", at, rotations)
			}
			if d.Current.String() != "2001:db8:a00::/56" {
				t.Errorf("current %v at the takeover: want the current prefix kept until the new client holds B", d.Current)
			}
			return
		}
		if st := p.st.DHCPv6PD; st != nil && st.ConfirmerNode != confirmer {
			if confirmer != "" {
				rotations++
			}
			confirmer = st.ConfirmerNode
		}
	}
	t.Fatalf("the liar a, flapping its claim, kept the client role %v (%d rotations; status %+v)", 400*time.Second, rotations, p.st.DHCPv6PD)
}
