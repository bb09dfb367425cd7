package decide

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
)

// liarClientWorld: the liar ("a", first by name) is the client, holds the
// server's first binding and never renews it; the honest agents act on
// their roles at every pass (30 s); the liar's digest is what say returns.
// It returns when the first binding was last pooled (current or draining
// with a deadline ahead), when the server's last statement about it ended
// (the last time an honest confirmer was offered it, plus pdValid), the
// passes whose decision reports the pair stalled (Decision.PDStalled), and
// the last decision.
func liarClientWorld(t *testing.T, honest int, say func(w *pdWorld, a netip.Prefix) string, run time.Duration) (lastPooled, statedEnd time.Time, stalled []time.Time, last Decision) {
	t.Helper()
	w := newPDWorld(honest, true, "")
	a := w.bind
	const pass = 30 * time.Second
	for w.now.Sub(t0) < run {
		w.liar.digest, w.liar.reported = say(w, a), true
		for i := range w.honest {
			w.act(i)
			if _, k := w.roles(); w.honest[i].name == k && w.honest[i].offered == a {
				statedEnd = w.now.Add(pdValid)
			}
		}
		w.step(t)
		reports, _ := w.ballot.Reports(w.now)
		d := For(w.m, w.st, reports, w.now)
		if slices.Contains(d.Pooled, a) {
			lastPooled = w.now
		}
		if d.PDStalled {
			stalled = append(stalled, w.now)
		}
		last = d
		w.now = w.now.Add(pass)
	}
	t.Logf("at the end: current %s, dhcpv6pd %+v", w.st.CurrentPrefix, *w.st.DHCPv6PD)
	return lastPooled, statedEnd, stalled, last
}

// checkStall asserts a two-node stall is reported from the first pass at or
// after since + the stated lifetime, and on every pass after (the status
// changes once), with the pair still standing (nothing moves).
func checkStall(t *testing.T, stalled []time.Time, last Decision, pass time.Duration) {
	t.Helper()
	at := last.Confirm.StallsAt()
	switch {
	case at.IsZero() || !last.PDStalled:
		t.Fatalf("the stall is not reported: confirmation %+v", last.Confirm)
	case at != last.Confirm.Since.Add(last.Confirm.valid):
		t.Errorf("the stall is reported from %v, want since %v + the stated %v", at, last.Confirm.Since, last.Confirm.valid)
	case len(stalled) == 0 || stalled[0].Before(at) || !stalled[0].Before(at.Add(pass)):
		t.Errorf("first reported stalled at %v, want the first pass from %v", stalled, at)
	}
	for i := 1; i < len(stalled); i++ {
		if stalled[i].Sub(stalled[i-1]) != pass {
			t.Fatalf("the stall report flaps: stalled at %v, then not until %v", stalled[i-1], stalled[i])
		}
	}
}

func encodeLink(t *testing.T, ps ...digest.Prefix) string {
	t.Helper()
	v, err := digest.Encode(digest.Node{Links: []digest.Link{{Name: "wan", Prefixes: ps}}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Red team (issue 42, one node): in a cluster of two eligible nodes a liar
// named client that stops renewing keeps the delegation the server let
// lapse pooled, as the current prefix, for as long as it likes - though
// status.dhcpv6pd.validLifetime now records how long the server said it
// would last. The honest confirmer is offered the server's next binding
// from the lapse on, the disagreement is reported (DelegationDisagrees),
// and nothing bounds it: "a stall is reported and bounded" holds only for
// the report. Here the server's last statement about A ended at t0+19m30s
// (an Advertise to the confirmer at t0+9m30s, valid 10 min); six hours
// later A is still current.
//
// Changed (the lead's call, docs/security.md "One node"): with two nodes
// nothing tells the liar from the honest one - the same digests come from
// an honest client renewing A and a confirmer lying about B - so dropping
// A would let one node remove the cluster's real prefix. A stays, as
// documented; what was wrong is that the stall was quiet (Ready, not
// Degraded). The test now asserts it is reported from since + the stated
// lifetime on (Decision.PDStalled: Degraded DelegationStalled and a
// Warning), steadily, while A stays current. It failed before: no stall
// was reported.
func TestALiarClientOfTwoNodesKeepsALapsedDelegationPooled(t *testing.T) {
	holdsA := func(w *pdWorld, a netip.Prefix) string {
		return encodeLink(t, digest.Prefix{Prefix: a, Sources: digest.SourcePD})
	}
	last, end, stalled, d := liarClientWorld(t, 1, holdsA, 6*time.Hour)
	checkStall(t, stalled, d, 30*time.Second)
	if at := d.Confirm.StallsAt(); at.Sub(end) > ConfirmWithin {
		t.Errorf("the stall is reported from t0+%v, the server's statements about A ended t0+%v", at.Sub(t0), end.Sub(t0))
	}
	if !last.After(end) {
		t.Errorf("A left the pools at t0+%v: one node's word moved the cluster's prefix", last.Sub(t0))
	}
}

// With three nodes the same liar cannot keep it (a second confirmer backs
// the next binding and takes the client over; the liar, no longer client,
// votes on no drain): what held.
func TestALiarClientOfThreeNodesKeepsNoLapsedDelegation(t *testing.T) {
	for name, say := range map[string]func(w *pdWorld, a netip.Prefix) string{
		"holds A": func(w *pdWorld, a netip.Prefix) string {
			return encodeLink(t, digest.Prefix{Prefix: a, Sources: digest.SourcePD})
		},
		"A deprecated 2^32-1 s once another is current": func(w *pdWorld, a netip.Prefix) string {
			if w.st.CurrentPrefix != "" && w.st.CurrentPrefix != a.String() {
				return encodeLink(t, digest.Prefix{Prefix: a, Deprecated: true, Remaining: digest.MaxLifetime * time.Second, Sources: digest.SourcePD},
					digest.Prefix{Prefix: netip.MustParsePrefix(w.st.CurrentPrefix), Sources: digest.SourcePD})
			}
			return encodeLink(t, digest.Prefix{Prefix: a, Sources: digest.SourcePD})
		},
	} {
		last, end, stalled, _ := liarClientWorld(t, 2, say, 6*time.Hour)
		if last.After(end) {
			t.Errorf("%s: pooled until t0+%v, past the server's t0+%v", name, last.Sub(t0), end.Sub(t0))
		}
		if len(stalled) > 0 {
			t.Errorf("%s: a stall reported with three nodes (the rotation settles it) at %v", name, stalled)
		}
	}
}

// probingWorld: three nodes, the liar "a" the client. The liar renews the
// server's binding A at every pass (the server keeps it), the server
// renumbers to B at renumberAt; the honest confirmer probes as the agent
// does - when named, when status.dhcpv6pd.unconfirmed changes, and at the
// offer's T1 (pdValid/2) after its last probe. The liar keeps claiming A
// until the rotation would come (since + ConfirmWithin, one pass early),
// then claims B and A deprecated with 2^32-1 s left.
func probingWorld(t *testing.T, renumberAt time.Duration) (lastPooled, statedEnd, transition time.Time) {
	t.Helper()
	w := newPDWorld(2, true, "")
	a := w.bind
	const pass = 30 * time.Second
	lastProbe := map[string]time.Time{}
	lastConfirmer, lastUnconfirmed := "", ""
	for w.now.Sub(t0) < 2*time.Hour {
		if w.serial == 0 && w.now.Sub(t0) >= renumberAt {
			w.serial++
			w.bind, w.renewed = serverPrefix(w.serial), w.now
			w.gave[w.bind] = true
		}
		client, confirmer := w.roles()
		if client == w.liar.name && w.bind == a {
			// The liar renews A: the server keeps it, and states it
			// valid pdValid from now in its Reply.
			w.renewed, statedEnd = w.now, w.now.Add(pdValid)
		}
		claim := encodeLink(t, digest.Prefix{Prefix: a, Sources: digest.SourcePD})
		if pd := w.st.DHCPv6PD; w.bind != a && pd != nil && pd.Since != "" {
			since, _ := time.Parse(time.RFC3339, pd.Since)
			if !w.now.Add(pass).Before(since.Add(ConfirmWithin)) {
				claim = encodeLink(t, digest.Prefix{Prefix: a, Deprecated: true, Remaining: digest.MaxLifetime * time.Second, Sources: digest.SourcePD},
					digest.Prefix{Prefix: w.bind, Sources: digest.SourcePD})
			}
		}
		if w.st.CurrentPrefix != "" && w.st.CurrentPrefix != a.String() {
			claim = encodeLink(t, digest.Prefix{Prefix: a, Deprecated: true, Remaining: digest.MaxLifetime * time.Second, Sources: digest.SourcePD},
				digest.Prefix{Prefix: w.bind, Sources: digest.SourcePD})
		}
		w.liar.digest, w.liar.reported = claim, true
		var unconfirmed string
		if pd := w.st.DHCPv6PD; pd != nil {
			unconfirmed = pd.Unconfirmed
		}
		for i, h := range w.honest {
			switch {
			case h.name == client:
				w.act(i)
			case h.name == confirmer:
				if confirmer != lastConfirmer || unconfirmed != "" && unconfirmed != lastUnconfirmed || w.now.Sub(lastProbe[h.name]) >= pdValid/2 {
					w.act(i)
					lastProbe[h.name] = w.now
					if h.offered == a && w.now.Add(pdValid).After(statedEnd) {
						statedEnd = w.now.Add(pdValid)
					}
				}
			}
		}
		lastConfirmer, lastUnconfirmed = confirmer, unconfirmed
		before := w.st.CurrentPrefix
		w.step(t)
		if before == a.String() && w.st.CurrentPrefix != a.String() && transition.IsZero() {
			transition = w.now
		}
		reports, _ := w.ballot.Reports(w.now)
		if d := For(w.m, w.st, reports, w.now); slices.Contains(d.Pooled, a) {
			lastPooled = w.now
		}
		w.now = w.now.Add(pass)
	}
	return lastPooled, statedEnd, transition
}

// Red team (issue 42, one node): the cap on a replaced delegation's drain
// counts validLifetime from the writer's transition, not from when the
// server last stated it. A liar client that renews A until the server
// renumbers, then keeps claiming A, delays the transition until the honest
// confirmer's next probe (the offer's T1) plus ConfirmWithin, claims the new
// binding one pass before the rotation would hand the client over, and says
// A has 2^32-1 s left: A drains validLifetime from that transition - up to
// T1 + ConfirmWithin past the end of anything the server stated about it
// (the liar's last Renew, the confirmer's last Advertise). Here 6 minutes
// past, on a 10-minute lifetime (a real server's T1 is half its valid
// lifetime: 30 minutes past on an hour).
//
// Fixed: the cap counts from status.dhcpv6pd.otherOffered, the first pass
// the honest confirmer was offered the new binding, not from the late
// transition. What remains is the confirmer's detection window: the writer
// cannot know the server stopped stating A before a confirmer hears it say
// something else, and the confirmer asks at the offer's T1 (the agent's
// documented "caught within one T1"); so the bound here is the server's
// last word plus T1 and a pass, no longer plus the liar's delay (6 min
// past before the fix, 4m30s now, at renumberAt t0+5m45s).
func TestALiarClientsDelayedRenumberingDrainsPastTheServersWord(t *testing.T) {
	for _, r := range []time.Duration{5 * time.Minute, 5*time.Minute + 45*time.Second, 9 * time.Minute} {
		last, end, tr := probingWorld(t, r)
		if last.After(end.Add(pdValid/2 + 30*time.Second)) {
			t.Errorf("renumbered at t0+%v, adopted at t0+%v: A pooled until t0+%v, %v past the end of the server's last statement about it (t0+%v)",
				r, tr.Sub(t0), last.Sub(t0), last.Sub(end), end.Sub(t0))
		}
	}
}

// Red team: two DynamicPrefixes in mode client on one link. The agents run
// one client (and one prober) per link - the first DynamicPrefix by name
// (dhcp6.Supervisor.Set; docs/compatibility.md "One client per interface
// and node") - and a digest does not say whose delegation an entry is. The
// writer names the same client and confirmer for both (the same reports,
// the same rule), so "lab", whose client and prober never ran, adopts
// "home"'s delegation: the server delegated it to home's identity (its
// DUID and IAID), never to lab's, and both DynamicPrefixes pool it.
//
// Fixed: the writer gives lab's model the DynamicPrefix that took the
// link (model.LinkTakenBy, as the controller does from its cache): lab
// names no client and no confirmer, and adopts nothing there.
func TestASecondDynamicPrefixOnOneLinkAdoptsNoOtherDelegation(t *testing.T) {
	spec := dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}}
	// Node a runs home's client, b home's prober (lab's were refused on
	// the link).
	r := reports(t, "v1;wan=2001:db8:a00::/56 p pd", "v1;wan=2001:db8:a00::/56 p3600 offer", "v1;wan=")
	hm, lm := parse(spec), model.Parse("lab", spec)
	hm.PDTakenBy, lm.PDTakenBy = model.LinkTakenBy(hm, []model.Model{lm}), model.LinkTakenBy(lm, []model.Model{hm})
	var home, lab Status
	for i := range 3 {
		now := t0.Add(time.Duration(i) * time.Minute)
		dh := For(hm, home, r, now)
		home = pdStatus(dh)
		dl := For(lm, lab, r, now)
		lab = pdStatus(dl)
	}
	if lab.DHCPv6PD != nil {
		t.Errorf("lab names roles on home's link: %+v", *lab.DHCPv6PD)
	}
	if home.CurrentPrefix != "2001:db8:a00::/56" {
		t.Fatalf("home follows %q, want its delegation", home.CurrentPrefix)
	}
	if lab.CurrentPrefix != "" {
		t.Errorf("lab, whose client never ran, follows %q - home's delegation (client %s, confirmer %s for both)",
			lab.CurrentPrefix, lab.DHCPv6PD.ClientNode, lab.DHCPv6PD.ConfirmerNode)
	}
}

// takeoverWorld: honest h0 is the client and renews at T1 (pdValid/2),
// honest h1 confirms, probing as the agent does (named, unconfirmed
// changed, T1); the liar "x" is last by name. The server renumbers at
// renumberAt. When the rotation names x confirmer with a backing, x offers
// the backing (the server's new binding: it takes the client over); as
// client it holds the new binding and says the old one has 2^32-1 s left.
// It returns when the old binding was last pooled and when the server's
// last statement about it (h0's Renew, h1's Advertise) ended.
func takeoverWorld(t *testing.T, renumberAt time.Duration, liar bool) (lastPooled, statedEnd time.Time) {
	t.Helper()
	w := newPDWorld(2, false, "")
	a := w.bind
	const pass = 30 * time.Second
	// h0 took its lease a pass before the writer's first pass (its T1
	// falls a pass before the confirmer's, named at that first pass).
	w.honest[0].held, w.renewed = a, t0.Add(-30*time.Second)
	lastAct := map[string]time.Time{"h0": w.renewed}
	lastConfirmer, lastUnconfirmed := "", ""
	for w.now.Sub(t0) < time.Hour {
		if w.serial == 0 && w.now.Sub(t0) >= renumberAt {
			w.serial++
			w.bind, w.renewed = serverPrefix(w.serial), w.now
			w.gave[w.bind] = true
		}
		client, confirmer := w.roles()
		var unconfirmed, backing string
		if pd := w.st.DHCPv6PD; pd != nil {
			unconfirmed, backing = pd.Unconfirmed, pd.Backing
		}
		for i, h := range w.honest {
			due := lastAct[h.name].IsZero() || w.now.Sub(lastAct[h.name]) >= pdValid/2
			switch {
			case h.name == client && due:
				w.act(i)
				lastAct[h.name] = w.now
				if h.held == a {
					statedEnd = w.now.Add(pdValid)
				}
			case h.name == confirmer && (due || confirmer != lastConfirmer || unconfirmed != "" && unconfirmed != lastUnconfirmed):
				w.act(i)
				lastAct[h.name] = w.now
				if h.offered == a && w.now.Add(pdValid).After(statedEnd) {
					statedEnd = w.now.Add(pdValid)
				}
			}
		}
		lastConfirmer, lastUnconfirmed = confirmer, unconfirmed
		switch {
		case !liar:
			// An honest x: what its role asks, at once.
			var ps []digest.Prefix
			if client == w.liar.name {
				ps = append(ps, digest.Prefix{Prefix: w.server(), Sources: digest.SourcePD})
			}
			if confirmer == w.liar.name {
				ps = append(ps, digest.Prefix{Prefix: w.server(), Valid: pdValid, Sources: digest.SourceOffer})
			}
			w.liar.digest = encodeLink(t, ps...)
		case client == w.liar.name:
			w.liar.digest = encodeLink(t, digest.Prefix{Prefix: a, Deprecated: true, Remaining: digest.MaxLifetime * time.Second, Sources: digest.SourcePD},
				digest.Prefix{Prefix: w.bind, Sources: digest.SourcePD})
		case confirmer == w.liar.name && backing != "":
			w.liar.digest = encodeLink(t, digest.Prefix{Prefix: netip.MustParsePrefix(backing), Valid: pdValid, Sources: digest.SourceOffer})
		default:
			w.liar.digest = encodeLink(t)
		}
		w.liar.reported = true
		w.step(t)
		reports, _ := w.ballot.Reports(w.now)
		if d := For(w.m, w.st, reports, w.now); slices.Contains(d.Pooled, a) {
			lastPooled = w.now
		}
		w.now = w.now.Add(pass)
	}
	return lastPooled, statedEnd
}

// Red team (issue 42, one node): a liar last by name, never the client
// while the old delegation was current, waits for the rotation to name it
// confirmer after the honest confirmer heard the server's renumbering
// before the honest client renewed (their T1s fall apart), offers the
// backing - the new binding, so two nodes besides the client agree and it
// takes the client over - and as client says the old delegation has
// 2^32-1 s left. Its word is a client's word, though it never held the
// delegation it speaks for; capped, the old one drains validLifetime from
// the takeover: 3m30s past the end of everything the server stated about
// it (h0's last Renew, h1's last Advertise), 10 minutes longer than with x
// honest (then h0's next Renew ends it). With a server's T1 half an hour,
// the takeover comes up to T1 + 2 x ConfirmWithin after the server's last
// word, and so does the overrun.
//
// Fixed: the cap counts from status.dhcpv6pd.otherOffered (h1's first
// offer of the new binding), kept across the rotation and the takeover;
// what remains is the pass in which h1 heard the renumbering (30 s here,
// the tolerance the other test allows).
func TestALiarConfirmerTakingTheClientOverKeepsNoReplacedDelegation(t *testing.T) {
	for _, r := range []time.Duration{9*time.Minute + 40*time.Second, 14*time.Minute + 40*time.Second} {
		honest, _ := takeoverWorld(t, r, false)
		last, end := takeoverWorld(t, r, true)
		if last.After(end.Add(30 * time.Second)) {
			t.Errorf("renumbered at t0+%v: the old delegation pooled until t0+%v, %v past the end of the server's last statement about it (t0+%v; with x honest it left at t0+%v)",
				r, last.Sub(t0), last.Sub(end), end.Sub(t0), honest.Sub(t0))
		}
	}
}

// Red team: the same stall from the other role. Two eligible nodes, honest
// h0 the client, the liar x its confirmer offering the old binding for
// ever; the server renumbers at t0+5m and h0 holds the new one from then on
// (nobody renews the old). The old one stays current, pooled, three hours
// on: the writer knows the server stated 10 minutes for it
// (validLifetime 600) and that the two disagree since t0+5m.
//
// Changed like TestALiarClientOfTwoNodesKeepsALapsedDelegationPooled:
// the old delegation stays (a liar client renewing it and an honest
// confirmer look the same), and the test asserts the stall is reported
// from since + the stated lifetime (t0+15m) on, steadily. It failed
// before: nothing was reported.
func TestALiarConfirmerOfTwoNodesKeepsNoReplacedDelegationPooled(t *testing.T) {
	w := newPDWorld(1, false, "") // h0 client, x confirmer
	a := w.bind
	var last, statedEnd time.Time
	var stalled []time.Time
	var d Decision
	for w.now.Sub(t0) < 3*time.Hour {
		if w.serial == 0 && w.now.Sub(t0) >= 5*time.Minute {
			w.serial++
			w.bind, w.renewed = serverPrefix(w.serial), w.now
			w.gave[w.bind] = true
		}
		w.liar.digest, w.liar.reported = encodeLink(t, digest.Prefix{Prefix: a, Valid: pdValid, Sources: digest.SourceOffer}), true
		w.act(0)
		if w.honest[0].held == a {
			statedEnd = w.now.Add(pdValid) // h0's Renew: the server's word on it
		}
		w.step(t)
		reports, _ := w.ballot.Reports(w.now)
		if d = For(w.m, w.st, reports, w.now); slices.Contains(d.Pooled, a) {
			last = w.now
		}
		if d.PDStalled {
			stalled = append(stalled, w.now)
		}
		w.now = w.now.Add(30 * time.Second)
	}
	checkStall(t, stalled, d, 30*time.Second)
	if at := d.Confirm.StallsAt(); at.Sub(statedEnd) > ConfirmWithin {
		t.Errorf("the stall is reported from t0+%v; the server's last word on the old delegation ended t0+%v", at.Sub(t0), statedEnd.Sub(t0))
	}
	if !last.After(statedEnd) {
		t.Errorf("the old delegation left at t0+%v: one node's word moved the cluster's prefix", last.Sub(t0))
	}
}
