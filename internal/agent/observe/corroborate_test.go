package observe

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

var pX = netip.MustParsePrefix("2001:db8:bad::/64") // the attacker's

func offer(ps ...netip.Prefix) []RAPrefix {
	out := make([]RAPrefix, 0, len(ps))
	for _, p := range ps {
		out = append(out, RAPrefix{p, time.Hour, 30 * time.Minute, true})
	}
	return out
}

// testMargin is the margin these tests give the window (the tightest a user
// may set: the default is for loaded machines and late routers).
const testMargin = 250 * time.Millisecond

// fullWindow is the RFC 4861 bound's window: a router that multicasts its
// answers and did so just before it was asked.
const fullWindow = MinDelayBetweenRAs + MaxRADelay + testMargin

// initialWindow is the longest a solicitation's window lasts: an address
// not learnt to unicast its answers, asked (not first) within
// MinDelayBetweenRAs of its last multicast RA, may be a router in its
// initial phase holding its answer (answer.go).
const initialWindow = MinDelayBetweenRAs + MaxInitialRtrAdvertInterval + MaxRADelay + testMargin

// newState is New on eth0 with the tests' margin.
func newState() *State {
	s := New("eth0")
	s.Corroboration = testMargin
	return s
}

// agreed is a corroborating State on eth0 that believes routerA offers A.
func agreed(t *testing.T) *State {
	t.Helper()
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	s.RA("eth0", routerA, t0, offer(pA))
	solicit(t, s, t0.Add(time.Millisecond))
	s.RA("eth0", routerA, t0.Add(2*time.Millisecond), offer(pA))
	// The router's last multicast RA before the link was listened to is
	// unknown: it may be in its initial phase, holding its answer. Asked
	// again 3 s after its last multicast RA, it answers at once.
	again := t0.Add(2*time.Millisecond + MinDelayBetweenRAs)
	solicit(t, s, again)
	s.RA("eth0", routerA, again.Add(time.Millisecond), offer(pA))
	if got := encode(t, s, again.Add(MaxRADelay+testMargin)); got != "v1;eth0=2001:db8:a::/64 p ra" {
		t.Fatalf("the router's first offer, answered: %s", got)
	}
	return s
}

// solicit does what the agent does: asks for the links due and reports the
// solicitation sent at at.
func solicit(t *testing.T, s *State, at time.Time) {
	t.Helper()
	due, _ := s.Solicit(at)
	if !slices.Equal(due, []string{"eth0"}) {
		t.Fatalf("Solicit(%s) = %v, want eth0 due", at.Sub(t0), due)
	}
	s.Solicited("eth0", at)
}

func TestARealRenumberingIsBelievedOnceTheRouterConfirmsIt(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	s.RA("eth0", routerA, at, offer(pB)) // the router rebooted onto B
	if got := encode(t, s, at); got != "v1;eth0=2001:db8:a::/64 p ra" {
		t.Errorf("a change heard once is believed at once: %s", got)
	}
	solicit(t, s, at.Add(time.Millisecond))
	s.RA("eth0", routerA, at.Add(2*time.Millisecond), offer(pB)) // its answer
	if got := encode(t, s, at.Add(initialWindow-time.Millisecond)); got != "v1;eth0=2001:db8:a::/64 p ra" {
		t.Errorf("believed before the router's multicast answer was due (it may be in its initial phase: a reboot): %s", got)
	}
	next, ok := s.NextDeadline(at.Add(time.Second))
	if want := at.Add(initialWindow); !ok || !next.Equal(want) {
		t.Errorf("NextDeadline = %s, want the window's end %s", next.Sub(t0), want.Sub(t0))
	}
	// A's first word was at t0: 3520 s of its hour were left when B was believed.
	if got, want := encode(t, s, at.Add(initialWindow)), "v1;eth0=2001:db8:a::/64 d3520 ra,2001:db8:b::/64 p ra"; got != want {
		t.Errorf("after the window:\n got %s\nwant %s", got, want)
	}
	if c := s.Conflicts("eth0", at.Add(time.Second)); len(c) != 0 {
		t.Errorf("conflicts %v after a real renumbering", c)
	}
}

func TestASpooferContradictedByTheRouterMovesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoof []RAPrefix
	}{
		{"its prefix alone (omitting A)", offer(pX)},
		{"A deprecated", []RAPrefix{{pA, time.Hour, 0, true}}},
		{"A withdrawn", []RAPrefix{{pA, 0, 0, true}, {pX, time.Hour, time.Hour, true}}},
		{"its prefix beside A", offer(pA, pX)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := agreed(t)
			at := t0.Add(time.Minute)
			// The spoofer speaks twice before the solicitation and answers it too.
			s.RA("eth0", routerA, at, tc.spoof)
			s.RA("eth0", routerA, at.Add(time.Millisecond), tc.spoof)
			solicit(t, s, at.Add(2*time.Millisecond))
			s.RA("eth0", routerA, at.Add(3*time.Millisecond), tc.spoof)
			s.RA("eth0", routerA, at.Add(4*time.Millisecond), offer(pA)) // the real router's answer
			// The kernel formed an address from the spoofed RA.
			spoofsX := slices.ContainsFunc(tc.spoof, func(p RAPrefix) bool { return p.Prefix == pX })
			if spoofsX {
				s.Address("eth0", Address{Addr: addr(pX, 1), Valid: time.Hour, Preferred: time.Hour}, false, at.Add(5*time.Millisecond))
			}
			for _, d := range []time.Duration{10 * time.Millisecond, time.Second, 30 * time.Second} {
				n, rejected := s.Snapshot(at.Add(d))
				got, _ := digest.Encode(n)
				if want := "v1;eth0 conflict=2001:db8:a::/64 p ra"; got != want {
					t.Errorf("at +%s:\n got %s\nwant %s", d, got, want)
				}
				if spoofsX && !slices.ContainsFunc(rejected, func(r Rejected) bool { return r.Prefix == pX && r.Reason == ErrUncorroborated }) {
					t.Errorf("at +%s: the kernel's address in the spoofed prefix: rejected %v", d, rejected)
				}
			}
			if c := s.Conflicts("eth0", at.Add(time.Second)); !slices.Equal(c, []netip.Addr{routerA}) {
				t.Errorf("Conflicts = %v, want the router's address", c)
			}
			if n, _ := s.TakeCounts("eth0"); n != 1 {
				t.Errorf("%d contradictions counted, want 1", n)
			}
		})
	}
}

func TestTwoWordsBeforeTheSolicitationAreNotEnough(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	for i := range 5 {
		s.RA("eth0", routerA, at.Add(time.Duration(i)*time.Millisecond), offer(pX))
	}
	// No solicitation was sent (the agent failed to): nothing was put to the router.
	if got := encode(t, s, at.Add(10*time.Second)); got != "v1;eth0=2001:db8:a::/64 p ra" {
		t.Errorf("believed without asking the router: %s", got)
	}
	// Asked, but nobody answered after the solicitation: still not believed.
	s.Solicited("eth0", at.Add(11*time.Second))
	if got := encode(t, s, at.Add(20*time.Second)); got != "v1;eth0=2001:db8:a::/64 p ra" {
		t.Errorf("believed without an answer to the solicitation: %s", got)
	}
}

func TestAConflictHoldsTheLineAndClearsWhenTheRouterAgreesAgain(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	// 30 s of a spoofer speaking every 700 ms while the router advertises every 3 s.
	var last time.Time
	for ms := 0; ms < 30000; ms += 100 {
		now := at.Add(time.Duration(ms) * time.Millisecond)
		if ms%700 == 0 {
			s.RA("eth0", routerA, now, offer(pX))
		}
		if ms%3000 == 0 {
			s.RA("eth0", routerA, now, offer(pA))
		}
		if due, _ := s.Solicit(now); len(due) > 0 {
			s.Solicited("eth0", now)
			s.RA("eth0", routerA, now.Add(time.Millisecond), offer(pA)) // the router answers
		}
		if got := encode(t, s, now.Add(2*time.Millisecond)); got != "v1;eth0 conflict=2001:db8:a::/64 p ra" && ms > 0 {
			t.Fatalf("at +%dms: %s", ms, got)
		}
		last = now
	}
	// The spoofer stops; the router renumbers to B while the conflict is still reported.
	now := last.Add(time.Second)
	s.RA("eth0", routerA, now, offer(pB))
	solicit(t, s, now.Add(time.Millisecond))
	s.RA("eth0", routerA, now.Add(2*time.Millisecond), offer(pB))
	// The router's words refreshed nothing during the conflict: A is frozen
	// at what its word before the conflict left when B was believed.
	if got, want := encode(t, s, now.Add(initialWindow+time.Second)), "v1;eth0 conflict=2001:db8:a::/64 d3488 ra,2001:db8:b::/64 p ra"; got != want {
		t.Errorf("a real renumbering during the conflict report:\n got %s\nwant %s", got, want)
	}
	// ConflictHold after the last contradiction, the report clears.
	if got, want := encode(t, s, last.Add(DefaultConflictHold+time.Second)), "v1;eth0=2001:db8:a::/64 d3488 ra,2001:db8:b::/64 p ra"; got != want {
		t.Errorf("after the hold:\n got %s\nwant %s", got, want)
	}
}

func TestRefreshesAreBelievedAtOnceAndSolicitNothing(t *testing.T) {
	s := agreed(t)
	// The first word re-sending the same lifetimes later is put to the router
	// once: a router counting its lifetimes down must not have its old word
	// replayed as new.
	at := t0.Add(10 * time.Second)
	s.RA("eth0", routerA, at, offer(pA))
	solicit(t, s, at.Add(time.Millisecond))
	s.RA("eth0", routerA, at.Add(2*time.Millisecond), offer(pA))
	// Asked within 3 s of its last multicast RA, the router may hold its
	// answer (its initial phase): asked again 3 s after it, it answers at once.
	again := at.Add(2*time.Millisecond + MinDelayBetweenRAs)
	solicit(t, s, again)
	s.RA("eth0", routerA, again.Add(time.Millisecond), offer(pA))
	s.Settle(at.Add(fullWindow + time.Second))
	for i := 5; i <= 15; i++ {
		now := t0.Add(time.Duration(i) * 3 * time.Second)
		s.RA("eth0", routerA, now, offer(pA))
		if due, next := s.Solicit(now); len(due) > 0 || !next.IsZero() {
			t.Fatalf("a refresh solicits: %v %v", due, next)
		}
	}
	// Lifetimes counting down to the same ends change nothing either.
	at = t0.Add(time.Minute)
	believed := s.links["eth0"].ra[raKey{pA, routerA}]
	s.RA("eth0", routerA, at, []RAPrefix{{pA, believed.valid.remaining(at), believed.preferred.remaining(at) - time.Second, true}})
	if due, _ := s.Solicit(at); len(due) > 0 {
		t.Errorf("lifetimes counting down solicit")
	}
}

func TestSolicitationsAreSpaced(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	s.RA("eth0", routerA, at, offer(pX))
	solicit(t, s, at)
	s.RA("eth0", routerA, at.Add(time.Millisecond), offer(pA)) // contradiction
	s.RA("eth0", routerA, at.Add(2*time.Millisecond), offer(pX))
	due, next := s.Solicit(at.Add(3 * time.Millisecond))
	if len(due) != 0 || !next.Equal(at.Add(SolicitSpacing)) {
		t.Errorf("Solicit = %v, %s: want none before %s", due, next.Sub(at), SolicitSpacing)
	}
	solicit(t, s, next)
	// A solicitation asked for but never reported sent is asked for again a spacing later.
	s.RA("eth0", routerA, next.Add(time.Millisecond), offer(pA))
	s.RA("eth0", routerA, next.Add(2*time.Millisecond), offer(pX))
	later := next.Add(SolicitSpacing)
	if due, _ := s.Solicit(later); len(due) != 1 {
		t.Fatalf("not due at %s", later.Sub(at))
	}
	if due, _ := s.Solicit(later.Add(time.Millisecond)); len(due) != 0 {
		t.Errorf("asked twice before the first was sent")
	}
	if due, _ := s.Solicit(later.Add(SolicitSpacing)); len(due) != 1 {
		t.Errorf("a lost solicitation is not asked for again")
	}
}

func TestARouterSplittingItsPrefixesIsNoConflict(t *testing.T) {
	s := newState()
	s.OmitDeprecates = false
	pC := netip.MustParsePrefix("2001:db8:c::/64")
	for i := range 30 { // long enough for each proposal's window in turn
		now := t0.Add(time.Duration(i) * 2 * time.Second)
		p := pA
		if i%2 == 1 {
			p = pC
		}
		s.RA("eth0", routerA, now, offer(p))
		if due, _ := s.Solicit(now); len(due) > 0 {
			s.Solicited("eth0", now)
			s.RA("eth0", routerA, now.Add(time.Millisecond), offer(p))
		}
	}
	if got, want := encode(t, s, t0.Add(2*time.Minute)), "v1;eth0=2001:db8:a::/64 p ra,2001:db8:c::/64 p ra"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestAFloodOfFreshSourcesStaysBounded: every table the LAN feeds has a cap,
// and the router heard first keeps its prefix in the digest.
func TestAFloodOfFreshSourcesStaysBounded(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	for i := range 20000 {
		now := at.Add(time.Duration(i) * time.Millisecond)
		src := netip.AddrFrom16([16]byte{0xfe, 0x80, 14: byte(i >> 8), 15: byte(i)})
		p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xf0 | byte(i>>16), byte(i >> 8), byte(i), 0}), 64)
		s.RA("eth0", src, now, offer(p))
		if i%3 == 0 { // a flooder that answers solicitations too
			if due, _ := s.Solicit(now); len(due) > 0 {
				s.Solicited("eth0", now)
			}
			s.RA("eth0", src, now.Add(time.Microsecond), offer(p))
		}
		if i%1000 == 0 {
			s.Snapshot(now)
		}
	}
	l := s.links["eth0"]
	n, _ := s.Snapshot(at.Add(21 * time.Second))
	if len(l.speakers) > maxSpeakers || len(l.vouched) > maxRAEntries+16 || len(l.ra) > maxRAEntries || len(l.since) > maxRouters {
		t.Errorf("tables: %d speakers, %d vouched, %d RA entries, %d routers", len(l.speakers), len(l.vouched), len(l.ra), len(l.since))
	}
	if len(n.Links) != 1 || !slices.ContainsFunc(n.Links[0].Prefixes, func(p digest.Prefix) bool { return p.Prefix == pA && !p.Deprecated }) {
		t.Errorf("the senior router's A was crowded out: %v", n)
	}
	if _, err := digest.Encode(n); err != nil {
		t.Errorf("digest under the flood: %v", err)
	}
}

// FuzzCorroborationTables: any sequence of RAs, solicitations and snapshots keeps
// every table within its cap and the digest encodable.
func FuzzCorroborationTables(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 1, 1, 4, 2, 0, 0, 3})
	f.Add([]byte("spoof-answer-spoof-answer"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		s := newState()
		now := t0
		for i, op := range ops {
			now = now.Add(time.Duration(op%7) * 100 * time.Millisecond)
			router := netip.AddrFrom16([16]byte{0xfe, 0x80, 15: op % 5})
			p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 6: op >> 4}), 64)
			switch op % 4 {
			case 0:
				s.RA("eth0", router, now, offer(p))
			case 1:
				s.RA("eth0", router, now, []RAPrefix{{p, time.Duration(op) * time.Second, 0, true}})
			case 2:
				if due, _ := s.Solicit(now); len(due) > 0 {
					s.Solicited("eth0", now)
				}
			case 3:
				n, _ := s.Snapshot(now)
				if _, err := digest.Encode(n); err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
			}
		}
		l := s.links["eth0"]
		if len(l.speakers) > maxSpeakers || len(l.ra) > maxRAEntries {
			t.Fatalf("tables over their caps: %d %d", len(l.speakers), len(l.ra))
		}
		if next, ok := s.NextDeadline(now); ok && !next.After(now) {
			t.Fatalf("NextDeadline %s not after now", fmt.Sprint(next.Sub(now)))
		}
	})
}

// The agent handles events in the order they reach its loop: the router's
// answer can come before the report that the solicitation went out.
func TestAnAnswerHandledBeforeTheSendReportCounts(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	s.RA("eth0", routerA, at, offer(pB))
	if due, _ := s.Solicit(at); len(due) != 1 {
		t.Fatal("not asked to solicit")
	}
	s.RA("eth0", routerA, at.Add(2*time.Millisecond), offer(pB)) // the answer, first
	s.Solicited("eth0", at.Add(time.Millisecond))                // the send, reported late
	if got, want := encode(t, s, at.Add(initialWindow+time.Second)), "v1;eth0=2001:db8:a::/64 d3519 ra,2001:db8:b::/64 p ra"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// The kernel forms a SLAAC address from any RA, believed or not (up to
// max_addresses, 16): a /64 address the kernel does not mark permanent
// counts only in a prefix a believed RA offered. Under a flood of fresh
// prefixes the kernel's addresses came from RAs long forgotten; they stay out
// however long they live. A static address (permanent) still counts.
func TestASLAACAddressCountsOnlyInAPrefixABelievedRAOffered(t *testing.T) {
	s := agreed(t)
	at := t0.Add(time.Minute)
	for i := range 2000 { // fresh sources, fresh prefixes: every word forgotten soon
		src := netip.AddrFrom16([16]byte{0xfe, 0x80, 14: byte(i >> 8), 15: byte(i)})
		p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xf0, byte(i >> 8), byte(i), 0}), 64)
		s.RA("eth0", src, at, offer(p))
		if i < 16 { // the kernel formed addresses for the first ones (infinite lifetimes for half)
			lt := 2 * time.Hour
			if i%2 == 0 {
				lt = Infinite
			}
			s.Address("eth0", Address{Addr: addr(p, 1), Valid: lt, Preferred: lt}, false, at)
		}
	}
	static := netip.MustParsePrefix("2001:db8:5:5::/64")
	s.Address("eth0", Address{Addr: addr(static, 1), Valid: Infinite, Preferred: Infinite, Permanent: true}, false, at)
	n, rejected := s.Snapshot(at.Add(10 * time.Minute))
	got, _ := digest.Encode(n)
	if want := "v1;eth0=2001:db8:5:5::/64 p addr,2001:db8:a::/64 p ra"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if n := len(slices.DeleteFunc(rejected, func(r Rejected) bool { return r.Reason != ErrUncorroborated })); n != 16 {
		t.Errorf("%d rejected as uncorroborated, want the kernel's 16", n)
	}
	// A prefix the agent published before a restart stays believed.
	s2 := newState()
	s2.Seed(digest.Node{Links: []digest.Link{{Name: "eth0", Prefixes: []digest.Prefix{{Prefix: pB, Deprecated: true, Remaining: time.Hour, Sources: digest.SourceAddr}}}}})
	s2.Address("eth0", Address{Addr: addr(pB, 1), Valid: time.Hour, Preferred: 0, Deprecated: true}, false, t0)
	if got := encode(t, s2, t0); got != "v1;eth0=2001:db8:b::/64 d3600 addr" {
		t.Errorf("after a restart: %s", got)
	}
}
