package observe

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

// The LAN adversary's words that "change nothing preferred" (issue 42): each
// is a proposal like any other, so the router's answer contradicts it and
// nothing it states is believed.

// spoofed plays a spoofer on routerA that speaks at at, again just after the
// solicitation it causes, while the router answers with its own offer.
func spoofed(t *testing.T, s *State, at time.Time, spoof, router []RAPrefix) {
	t.Helper()
	s.RA("eth0", routerA, at, spoof)
	solicit(t, s, at.Add(time.Millisecond))
	s.RA("eth0", routerA, at.Add(2*time.Millisecond), spoof)
	s.RA("eth0", routerA, at.Add(3*time.Millisecond), router)
	s.RA("eth0", routerA, at.Add(4*time.Millisecond), spoof)
}

// believedOf is what the state believes router offers, as a string.
func believedOf(s *State, now time.Time) string {
	l := s.links["eth0"]
	var out []string
	for k, e := range l.ra {
		if k.router != routerA {
			continue
		}
		out = append(out, fmt.Sprintf("%s valid %v preferred %v", k.prefix, e.valid.remaining(now), e.preferred.remaining(now)))
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

func TestAWordThatChangesNothingPreferredIsAProposal(t *testing.T) {
	pZ := netip.MustParsePrefix("2001:db8:bad:2::/64")
	infinite := Infinite
	behindNPT := []RAPrefix{{ula, time.Hour, 30 * time.Minute, true}, {pA, time.Hour, 0, false}}
	draining := []RAPrefix{{pB, time.Hour, 30 * time.Minute, true}, {pA, 20 * time.Minute, 0, true}}
	for _, tc := range []struct {
		name   string
		policy policy.Policy
		router []RAPrefix
		spoof  []RAPrefix
	}{
		{"a prefix added deprecated, infinite, where deprecated prefixes stand in", policy.Policy{GlobalOnly: true, FollowDeprecated: true},
			behindNPT, append(slices.Clone(behindNPT), RAPrefix{pZ, infinite, 0, false})},
		{"a prefix added deprecated", policy.Policy{GlobalOnly: true},
			draining, append(slices.Clone(draining), RAPrefix{pZ, time.Hour, 0, true})},
		{"a draining prefix's lifetime set to 1 s", policy.Policy{GlobalOnly: true},
			draining, []RAPrefix{draining[0], {pA, time.Second, 0, true}}},
		{"a draining prefix's lifetime set to 136 years", policy.Policy{GlobalOnly: true},
			draining, []RAPrefix{draining[0], {pA, infinite, 0, true}}},
		{"the preferred prefix listed twice, the second time deprecated", policy.Policy{GlobalOnly: true},
			draining, []RAPrefix{draining[0], draining[1], {pB, time.Hour, 0, true}}},
		{"the preferred prefix's lifetimes changed", policy.Policy{GlobalOnly: true},
			draining, []RAPrefix{{pB, infinite, infinite, true}, draining[1]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState()
			s.SetPolicies(map[string]policy.Policy{"eth0": tc.policy})
			s.RA("eth0", routerA, t0, tc.router)
			solicit(t, s, t0.Add(time.Millisecond))
			s.RA("eth0", routerA, t0.Add(2*time.Millisecond), tc.router)
			at := t0.Add(time.Minute)
			wantDigest := encode(t, s, at)
			wantBelieved := believedOf(s, at)
			spoofed(t, s, at, tc.spoof, tc.router)
			for _, d := range []time.Duration{10 * time.Millisecond, 5 * time.Second, 30 * time.Second} {
				now := at.Add(d)
				got := encode(t, s, now)
				if want := "v1;eth0 conflict=" + wantDigest[len("v1;eth0="):]; got != want {
					t.Errorf("digest at +%s:\n got %s\nwant %s", d, got, want)
				}
				if got, want := believedOf(s, at), wantBelieved; got != want {
					t.Errorf("believed at +%s:\n got %s\nwant %s", d, got, want)
				}
			}
		})
	}
}

// resent has the router re-send its offer alike at at and corroborates it:
// from then on its words re-sending it alike refresh it at once.
func resent(t *testing.T, s *State, at time.Time) {
	t.Helper()
	s.RA("eth0", routerA, at, offer(pA))
	solicit(t, s, at.Add(time.Millisecond))
	s.RA("eth0", routerA, at.Add(2*time.Millisecond), offer(pA))
	s.Settle(at.Add(fullWindow + time.Second))
}

// A replay of the router's own earlier word holds a real renumbering back no
// longer than the lifetimes the router stated: nothing moves, the conflict
// is reported, and the old prefix's preferred lifetime runs out.
func TestAReplayOfTheRoutersOldWordHoldsARenumberingBackNoLongerThanItsLifetimes(t *testing.T) {
	s := agreed(t) // A: valid 1 h, preferred 30 min
	old := offer(pA)
	renumbered := offer(pB)
	start := t0.Add(time.Minute)
	for at := start; at.Before(start.Add(40 * time.Minute)); at = at.Add(10 * time.Second) {
		s.RA("eth0", routerA, at, renumbered)                // the router, every 10 s
		s.RA("eth0", routerA, at.Add(time.Millisecond), old) // the replay, just after
		if due, _ := s.Solicit(at.Add(2 * time.Millisecond)); len(due) > 0 {
			s.Solicited("eth0", at.Add(2*time.Millisecond))
			s.RA("eth0", routerA, at.Add(3*time.Millisecond), old)        // the replay answers at once
			s.RA("eth0", routerA, at.Add(4*time.Millisecond), renumbered) // so does the router
		}
		got := encode(t, s, at.Add(5*time.Millisecond))
		// A's preferred lifetime, stated last by a word believed before
		// the router renumbered (t0), runs out 30 min after it.
		want := "v1;eth0 conflict=2001:db8:a::/64 p ra"
		if !at.Before(t0.Add(30 * time.Minute)) {
			want = "v1;eth0 conflict=2001:db8:a::/64 d1799 ra"
		}
		if got != want {
			t.Fatalf("at +%s:\n got %s\nwant %s", at.Sub(start), got, want)
		}
	}
}

// The kernel forms and refreshes SLAAC addresses on any RA, the replay's
// included: past the valid lifetime the router stated, the address the
// replay keeps preferred keeps A reported, deprecated, never preferred
// again (it was, "p addr", for as long as the replay went on).
func TestAReplayKeepsNoKernelAddressPreferredPastTheRoutersLifetimes(t *testing.T) {
	s := agreed(t) // A: valid 1 h, preferred 30 min
	old, renumbered := offer(pA), offer(pB)
	start := t0.Add(time.Minute)
	for at := start; at.Before(start.Add(80 * time.Minute)); at = at.Add(10 * time.Second) {
		s.RA("eth0", routerA, at, renumbered)
		s.RA("eth0", routerA, at.Add(time.Millisecond), old)
		if due, _ := s.Solicit(at.Add(2 * time.Millisecond)); len(due) > 0 {
			s.Solicited("eth0", at.Add(2*time.Millisecond))
			s.RA("eth0", routerA, at.Add(3*time.Millisecond), old)
			s.RA("eth0", routerA, at.Add(4*time.Millisecond), renumbered)
		}
		// The kernel heard the replay last: its address in A is preferred.
		s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, at.Add(5*time.Millisecond))
		got := encode(t, s, at.Add(6*time.Millisecond))
		var want string
		switch {
		case at.Before(t0.Add(30 * time.Minute)):
			want = "v1;eth0 conflict=2001:db8:a::/64 p ra"
		case at.Before(t0.Add(time.Hour)):
			want = "v1;eth0 conflict=2001:db8:a::/64 d1799 ra"
		default:
			want = "v1;eth0 conflict=2001:db8:a::/64 d1799 addr"
		}
		if got != want {
			t.Fatalf("at +%s:\n got %s\nwant %s", at.Sub(start), got, want)
		}
	}
}

// With ConflictBound the stall ends sooner than the router's lifetimes.
func TestAConflictBoundEndsTheStallSooner(t *testing.T) {
	s := agreed(t) // A: preferred 30 min
	s.ConflictBound = 5 * time.Minute
	start := t0.Add(time.Minute)
	for at := start; at.Before(start.Add(10 * time.Minute)); at = at.Add(10 * time.Second) {
		s.RA("eth0", routerA, at, offer(pB))
		s.RA("eth0", routerA, at.Add(time.Millisecond), offer(pA))
		if due, _ := s.Solicit(at.Add(2 * time.Millisecond)); len(due) > 0 {
			s.Solicited("eth0", at.Add(2*time.Millisecond))
			s.RA("eth0", routerA, at.Add(3*time.Millisecond), offer(pA))
			s.RA("eth0", routerA, at.Add(4*time.Millisecond), offer(pB))
		}
		got := encode(t, s, at.Add(5*time.Millisecond))
		preferred := strings.Contains(got, "2001:db8:a::/64 p ra")
		if want := at.Before(start.Add(5 * time.Minute)); preferred != want {
			t.Fatalf("at +%s: %s, want A preferred %v", at.Sub(start), got, want)
		}
	}
}

// A router that multicasts its answers (RFC 4861 6.2.6, radvd with
// AdvRASolicitedUnicast off) answers no sooner than MIN_DELAY_BETWEEN_RAS
// after its last multicast RA, plus up to MAX_RA_DELAY_TIME: a spoofer that
// speaks just after it and answers the solicitation at once is contradicted
// by its late answer, which counts before the window is settled.
func TestAMulticastingRoutersLateAnswerCounts(t *testing.T) {
	s := agreed(t)
	resent(t, s, t0.Add(10*time.Second))
	m := t0.Add(time.Minute)
	s.RA("eth0", routerA, m, offer(pA)) // the router's multicast RA
	s.RA("eth0", routerA, m.Add(time.Millisecond), offer(pX))
	solicit(t, s, m.Add(2*time.Millisecond))
	s.Heard("eth0", routerA, m.Add(3*time.Millisecond), offer(pX), false) // the spoofer answers at once
	late := m.Add(MinDelayBetweenRAs + MaxRADelay)
	if got := encode(t, s, late.Add(-time.Millisecond)); got != "v1;eth0=2001:db8:a::/64 p ra" {
		t.Fatalf("before the router's answer: %s", got)
	}
	s.RA("eth0", routerA, late, offer(pA)) // the router's answer, at the latest it may
	if got, want := encode(t, s, late.Add(time.Second)), "v1;eth0 conflict=2001:db8:a::/64 p ra"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// A router learned to unicast its answers (radvd's default) is corroborated
// within MAX_RA_DELAY_TIME and the margin; an address whose solicited
// answers came multicast, or came both ways, waits the multicast bound.
func TestTheWindowFitsHowTheRouterAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		// answer is how the address answers solicitations.
		answer func(s *State, at time.Time, p netip.Prefix)
		window time.Duration
	}{
		{"unicast", func(s *State, at time.Time, p netip.Prefix) { s.Heard("eth0", routerA, at, offer(p), false) }, MaxRADelay + testMargin},
		{"multicast", func(s *State, at time.Time, p netip.Prefix) { s.Heard("eth0", routerA, at, offer(p), true) }, initialWindow},
		{"a spoofer's unicast beside the router's multicast", func(s *State, at time.Time, p netip.Prefix) {
			s.Heard("eth0", routerA, at, offer(p), false)
			// The router's multicast answer: within MaxRADelay, as it
			// is to a solicitation 3 s after its last multicast RA.
			s.Heard("eth0", routerA, at.Add(400*time.Millisecond), offer(p), true)
		}, initialWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState()
			s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
			s.Solicited("eth0", t0) // the listener opens
			tc.answer(s, t0.Add(time.Millisecond), pA)
			// The first word's window is the initial phase's (the
			// router's last multicast RA before is unknown): asked again
			// 3 s after the last multicast RA.
			_, again := s.Solicit(t0.Add(time.Second))
			solicit(t, s, again)
			tc.answer(s, again.Add(time.Millisecond), pA)
			if got := encode(t, s, again.Add(initialWindow)); got != "v1;eth0=2001:db8:a::/64 p ra" {
				t.Fatalf("the first offer, after the full window: %s", got)
			}
			// The router renumbers; its periodic RA (multicast) says so
			// long after its last.
			at := t0.Add(10 * time.Minute)
			s.RA("eth0", routerA, at, offer(pB))
			solicit(t, s, at.Add(time.Millisecond))
			tc.answer(s, at.Add(2*time.Millisecond), pB)
			wantEnd := at.Add(time.Millisecond + tc.window)
			if tc.window > MaxRADelay+testMargin {
				wantEnd = at.Add(tc.window) // after its multicast at at
			}
			next, ok := s.NextDeadline(at.Add(3 * time.Millisecond))
			if !ok || !next.Equal(wantEnd) {
				t.Errorf("the window ends at +%s, want +%s", next.Sub(at), wantEnd.Sub(at))
			}
			landsAt(t, s, wantEnd)
		})
	}
}

// The RA table has a cap whatever the router: a trusted router's address is
// as easy to take as any other. What the digest carried is kept.
func TestTheRATableIsCappedWithTrustedRoutersToo(t *testing.T) {
	s := newState()
	s.Corroboration = 0 // believe every word: the cap alone bounds the table
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerA}}})
	s.RA("eth0", routerA, t0, []RAPrefix{{pB, time.Hour, 30 * time.Minute, true}, {pA, 20 * time.Minute, 0, true}})
	encode(t, s, t0)
	for i := range 2000 {
		var junk []RAPrefix
		for j := range 40 {
			p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xf0, byte(i >> 8), byte(i), byte(j)}), 64)
			junk = append(junk, RAPrefix{p, Infinite, 0, true})
		}
		s.RA("eth0", routerA, t0.Add(time.Duration(i)*time.Millisecond), append(junk, RAPrefix{pB, time.Hour, 30 * time.Minute, true}, RAPrefix{pA, 20 * time.Minute, 0, true}))
	}
	l := s.links["eth0"]
	if len(l.ra) > maxRAEntries {
		t.Errorf("%d RA entries, want at most %d", len(l.ra), maxRAEntries)
	}
	n, _ := s.Snapshot(t0.Add(3 * time.Second))
	var kept []string
	for _, p := range n.Links[0].Prefixes {
		if p.Prefix == pA || p.Prefix == pB {
			kept = append(kept, p.Prefix.String())
		}
	}
	if want := []string{pA.String(), pB.String()}; !slices.Equal(kept, want) {
		t.Errorf("the digest keeps %v of the router's real prefixes, want %v", kept, want)
	}
}

// The kernel forms a SLAAC address from the RA under corroboration before
// its window ends: on a real renumbering that is neither reported nor
// rejected (a warning in every agent's journal) until the window settles.
func TestAKernelAddressFromAnRAUnderCorroborationWaitsQuietly(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	s.RA("eth0", routerA, at, offer(pB))
	s.Address("eth0", Address{Addr: addr(pB, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, at.Add(time.Millisecond))
	n, rejected := s.Snapshot(at.Add(2 * time.Millisecond))
	if len(rejected) != 0 {
		t.Errorf("rejected while under corroboration: %v", rejected)
	}
	if got, _ := digest.Encode(n); got != "v1;eth0=2001:db8:a::/64 p ra" {
		t.Errorf("digest %s", got)
	}
}
