package observe

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
)

// Kinds of router the corroboration serves: one offering nothing, one
// reloaded to multicast its answers, one unicasting them, one with a longer
// MinDelayBetweenRAs, one that stops mentioning its prefix. Each case was an
// RA red team's open hole (issue 42), found again by the widened
// FuzzCorroboration; each test failed before its fix.

// A router that offers nothing - RAs with no prefix option (a home router
// that lost its ISP prefix, a network whose RAs carry none), or that only
// withdraw - contradicts a spoofer's prefix: every RA states every prefix its
// router offers (OmitDeprecates). Before, only an RA offering something was
// its router's whole offer, and a spoofer's prefix was believed, no
// conflict.
func TestARouterOfferingNothingContradictsASpoofer(t *testing.T) {
	withdrawn := []RAPrefix{{pA, 0, 0, true}}
	for _, tc := range []struct {
		name   string
		router []RAPrefix // what the router says from a minute on
	}{
		{"no prefix option", nil},
		{"its prefix withdrawn", withdrawn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := agreed(t)
			at := t0.Add(time.Minute)
			s.RA("eth0", routerA, at, tc.router)
			if due, _ := s.Solicit(at.Add(time.Millisecond)); len(due) > 0 { // a withdrawal is put to the router
				s.Solicited("eth0", at.Add(time.Millisecond))
				s.Heard("eth0", routerA, at.Add(2*time.Millisecond), tc.router, false)
			}
			spoof := t0.Add(2 * time.Minute)
			spoofed(t, s, spoof, offer(pX), tc.router)
			for _, d := range []time.Duration{10 * time.Millisecond, 5 * time.Second, 30 * time.Second} {
				if got := encode(t, s, spoof.Add(d)); strings.Contains(got, pX.Addr().String()) {
					t.Fatalf("+%s: the spoofer's prefix is believed: %s", d, got)
				}
			}
			if c := s.Conflicts("eth0", spoof.Add(30*time.Second)); len(c) != 1 {
				t.Errorf("conflicts %v, want routerA's reported", c)
			}
		})
	}
}

// The prefix lifecycle's rule holds: an RA that offers nothing deprecates
// nothing it omits (a router that stops advertising leaves its prefix to the
// lifetimes it stated), and no router of that kind is in conflict.
func TestAnRAOfferingNothingDeprecatesNothing(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	for i := range 5 {
		now := at.Add(time.Duration(i) * 10 * time.Second)
		s.RA("eth0", routerA, now, nil)
		if due, _ := s.Solicit(now.Add(time.Millisecond)); len(due) > 0 {
			s.Solicited("eth0", now.Add(time.Millisecond))
			s.Heard("eth0", routerA, now.Add(2*time.Millisecond), nil, false)
		}
	}
	if got := encode(t, s, at.Add(time.Minute)); got != "v1;eth0=2001:db8:a::/64 p ra" {
		t.Errorf("after a minute of RAs offering nothing: %s, want A still preferred", got)
	}
	if c := s.Conflicts("eth0", at.Add(time.Minute)); len(c) != 0 {
		t.Errorf("conflicts %v, want none", c)
	}
}

// unicastLearnt is a corroborating State on eth0 that believes routerA offers
// A and has learnt that it answers solicitations unicast.
func unicastLearnt(t *testing.T) *State {
	t.Helper()
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s.Solicited("eth0", t0) // the listener opens
	s.Heard("eth0", routerA, t0.Add(time.Millisecond), offer(pA), false)
	_, again := s.Solicit(t0.Add(time.Second))
	solicit(t, s, again)
	s.Heard("eth0", routerA, again.Add(time.Millisecond), offer(pA), false)
	at := again.Add(initialWindow)
	if got := encode(t, s, at); got != "v1;eth0=2001:db8:a::/64 p ra" {
		t.Fatalf("the first offer: %s", got)
	}
	if got := s.RouterAnswers("eth0", at)[AnswersUnicast]; got != 1 {
		t.Fatalf("the router is not learnt to unicast its answers: %v", s.RouterAnswers("eth0", at))
	}
	return s
}

// A router learnt to unicast its answers is reloaded to multicast them
// (radvd's AdvRASolicitedUnicast off, or a failover peer set up otherwise):
// in its initial phase it holds a rate-limited answer 16 s. A spoofer that
// offers its prefix just after the reload RA (which changes nothing) and
// answers the solicitation at once was believed 0.75 s later. Now what was
// learnt holds only for a solicitation 3 s or more after the address's last
// multicast RA before the proposal's first word: this one waits the initial
// phase, is asked again 3 s after the reload RA, and the router's answer then
// contradicts the spoofer.
func TestARouterReloadedToMulticastItsAnswersIsWaitedFor(t *testing.T) {
	s := unicastLearnt(t)
	reload := t0.Add(10 * time.Minute)
	s.RA("eth0", routerA, reload, offer(pA)) // the reload RA: nothing changes
	spoof := reload.Add(200 * time.Millisecond)
	s.RA("eth0", routerA, spoof, offer(pX))
	solicit(t, s, spoof.Add(time.Millisecond))
	s.Heard("eth0", routerA, spoof.Add(2*time.Millisecond), offer(pX), false) // the spoofer answers at once
	// Asked again 3 s after the address's last multicast RA (the
	// spoofer's), when radvd answers at once.
	_, again := s.Solicit(spoof.Add(time.Second))
	if again.IsZero() || again.Before(reload.Add(MinDelayBetweenRAs)) {
		t.Fatalf("asked again at +%s after the reload, want 3 s or more after it", again.Sub(reload))
	}
	for at := spoof.Add(10 * time.Millisecond); at.Before(again); at = at.Add(100 * time.Millisecond) {
		if got := encode(t, s, at); strings.Contains(got, pX.Addr().String()) {
			t.Fatalf("+%s after the reload, before the router answered: the spoofer's prefix is believed: %s", at.Sub(reload), got)
		}
	}
	solicit(t, s, again)
	s.Heard("eth0", routerA, again.Add(time.Millisecond), offer(pX), false)
	s.RA("eth0", routerA, again.Add(300*time.Millisecond), offer(pA)) // radvd, no longer rate-limited, answers
	if got := encode(t, s, again.Add(time.Minute)); strings.Contains(got, pX.Addr().String()) {
		t.Errorf("the spoofer's prefix is believed: %s", got)
	}
	if c := s.Conflicts("eth0", again.Add(time.Second)); len(c) != 1 {
		t.Errorf("conflicts %v, want routerA's reported", c)
	}
}

// The common case keeps its short window: a router learnt to unicast its
// answers renumbers (a reload, its RA bringing the change, its last
// multicast RA long before), answers at once, and the change lands
// MaxRADelay plus the margin after the solicitation.
func TestAUnicastRoutersRenumberingLandsInUnderASecond(t *testing.T) {
	s := unicastLearnt(t)
	reload := t0.Add(10 * time.Minute)
	s.RA("eth0", routerA, reload, []RAPrefix{{pB, time.Hour, 30 * time.Minute, true}, {pA, time.Hour, 0, true}})
	solicit(t, s, reload.Add(time.Millisecond))
	s.Heard("eth0", routerA, reload.Add(2*time.Millisecond), []RAPrefix{{pB, time.Hour, 30 * time.Minute, true}, {pA, time.Hour, 0, true}}, false)
	landsAt(t, s, reload.Add(time.Millisecond+MaxRADelay+testMargin))
}

// radvd's MinDelayBetweenRAs set above 3 s (6 s here), the router
// multicasting its answers: a solicitation 3.2 s after its last multicast RA
// is still rate-limited, answered 6 s after that RA. A spoofer speaking then
// and answering at once was believed 0.75 s after the solicitation; told the
// routers' MinDelayBetweenRAs (--router-min-delay), the agent waits it.
func TestARoutersLongerMinDelayBetweenRAsIsWaitedFor(t *testing.T) {
	s := agreed(t)
	s.RouterMinDelay = 6 * time.Second
	last := t0.Add(10 * time.Minute)
	s.RA("eth0", routerA, last, offer(pA)) // its periodic RA
	spoof := last.Add(3200 * time.Millisecond)
	s.Heard("eth0", routerA, spoof, offer(pX), false)
	solicit(t, s, spoof.Add(time.Millisecond))
	s.Heard("eth0", routerA, spoof.Add(2*time.Millisecond), offer(pX), false)
	for at := spoof.Add(10 * time.Millisecond); at.Before(last.Add(6 * time.Second)); at = at.Add(100 * time.Millisecond) {
		if got := encode(t, s, at); strings.Contains(got, pX.Addr().String()) {
			t.Fatalf("+%s after its last multicast RA, before the router answered: the spoofer's prefix is believed: %s", at.Sub(last), got)
		}
	}
	s.RA("eth0", routerA, last.Add(6*time.Second+400*time.Millisecond), offer(pA)) // its held answer
	if c := s.Conflicts("eth0", last.Add(7*time.Second)); len(c) != 1 {
		t.Errorf("conflicts %v, want routerA's reported", c)
	}
	if got := encode(t, s, last.Add(time.Minute)); strings.Contains(got, pX.Addr().String()) {
		t.Errorf("the spoofer's prefix is believed: %s", got)
	}
}

// A router that stops mentioning its prefix (RAs with no prefix option: it
// lost its ISP prefix) leaves it to the lifetimes it stated; a replay of its
// old RA after that is no re-send: it is put to the router, whose answer
// contradicts it, and the conflict is reported. Found by the widened
// FuzzCorroboration (2046f393be5b24e4): before, the replay refreshed the
// prefix at once (re-sent alike), and replays could keep it preferred for as
// long as they came.
func TestAReplayAfterTheRouterStopsMentioningItsPrefixRefreshesNothing(t *testing.T) {
	s := agreed(t)
	resent(t, s, t0.Add(30*time.Second)) // A re-sent alike: a refresh from now on
	last := t0.Add(30 * time.Second)     // the router's last word of A
	quiet := t0.Add(time.Minute)
	s.RA("eth0", routerA, quiet, nil) // it offers nothing from now on
	replay := quiet.Add(time.Second)
	spoofed(t, s, replay, offer(pA), nil)
	e := s.links["eth0"].ra[raKey{pA, routerA}]
	if got, stated := time.Time(e.valid), last.Add(time.Hour); got.After(stated.Add(LifetimeSlack)) {
		t.Errorf("A believed valid %s past the router's last word of it", got.Sub(stated))
	}
	if c := s.Conflicts("eth0", replay.Add(time.Second)); len(c) != 1 {
		t.Errorf("conflicts %v, want routerA's reported", c)
	}
}

// A router behind NPTv6 (followDeprecated) advertises its global prefix
// deprecated beside a preferred ULA; renumbering, it stops mentioning the
// old global prefix. A replay of its old RA after that is no re-send
// either: it changes nothing preferred, yet it would keep a prefix the
// router no longer mentions valid, and standing in, for as long as replays
// came. Found by FuzzTwoRouters (4daaaf3b0e0a069d): before, a whole offer
// that omitted an already deprecated prefix left it re-sent alike, and the
// replay refreshed it at once, unreported.
func TestAReplayAfterTheRouterStopsMentioningItsDeprecatedPrefixRefreshesNothing(t *testing.T) {
	npt := func(global netip.Prefix) []RAPrefix {
		return []RAPrefix{{global, time.Hour, 0, true}, {ula, time.Hour, 30 * time.Minute, true}}
	}
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true, FollowDeprecated: true}})
	told := func(at time.Time, word []RAPrefix) { // said, put to the router, said again
		s.RA("eth0", routerA, at, word)
		if due, _ := s.Solicit(at.Add(time.Millisecond)); len(due) > 0 {
			s.Solicited("eth0", at.Add(time.Millisecond))
		}
		s.RA("eth0", routerA, at.Add(2*time.Millisecond), word)
		s.Settle(at.Add(initialWindow + time.Second))
	}
	told(t0, npt(pA))
	told(t0.Add(30*time.Second), npt(pA)) // re-sent alike
	last := t0.Add(30*time.Second + 2*time.Millisecond)
	renumbered := t0.Add(10 * time.Minute)
	told(renumbered, npt(pB))           // A omitted
	standsIn := func(got string) bool { // B reported preferred, A deprecated
		return strings.Contains(got, "2001:db8:b::/64 p ") && !strings.Contains(got, "2001:db8:a::/64 p ")
	}
	if got := encode(t, s, renumbered.Add(time.Minute)); !standsIn(got) {
		t.Fatalf("the renumbering, corroborated: %s, want B standing in", got)
	}
	for at := renumbered.Add(time.Minute); at.Before(renumbered.Add(time.Hour)); at = at.Add(10 * time.Second) {
		s.RA("eth0", routerA, at, npt(pA)) // the replay
		if due, _ := s.Solicit(at.Add(time.Millisecond)); len(due) > 0 {
			s.Solicited("eth0", at.Add(time.Millisecond))
			s.RA("eth0", routerA, at.Add(2*time.Millisecond), npt(pA)) // it answers at once
			s.RA("eth0", routerA, at.Add(3*time.Millisecond), npt(pB)) // so does the router
		}
		s.Settle(at.Add(5 * time.Second))
		if e, ok := s.links["eth0"].ra[raKey{pA, routerA}]; ok && time.Time(e.valid).After(last.Add(time.Hour+LifetimeSlack)) {
			t.Fatalf("+%s: A believed valid %s past the router's last word of it", at.Sub(t0), time.Time(e.valid).Sub(last.Add(time.Hour)))
		}
		if got := encode(t, s, at.Add(5*time.Second)); !standsIn(got) {
			t.Fatalf("+%s: %s, want B standing in", at.Sub(t0), got)
		}
	}
	if c := s.Conflicts("eth0", renumbered.Add(time.Hour)); len(c) != 1 {
		t.Errorf("conflicts %v, want routerA's reported", c)
	}
}
