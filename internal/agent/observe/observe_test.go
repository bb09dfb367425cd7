package observe

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/digest"
)

var (
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	routerA = netip.MustParseAddr("fe80::1")
	routerB = netip.MustParseAddr("fe80::2")
	pA      = netip.MustParsePrefix("2001:db8:a::/64")
	pB      = netip.MustParsePrefix("2001:db8:b::/64")
	ula     = netip.MustParsePrefix("fd00:1::/64")
)

func encode(t *testing.T, s *State, now time.Time) string {
	t.Helper()
	n, _ := s.Snapshot(now)
	e, err := digest.Encode(n)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// believing is s with corroboration off: every RA believed at once. The
// tests of the other rules use it; corroborate_test.go tests corroboration.
func believing(s *State) *State {
	s.Corroboration = 0
	return s
}

// globalOnly is a State watching link, reporting only global unicast prefixes.
func globalOnly(link string) *State {
	s := believing(New(link))
	s.SetPolicies(map[string]policy.Policy{link: {GlobalOnly: true}})
	return s
}

func addr(p netip.Prefix, host byte) netip.Prefix {
	b := p.Addr().As16()
	b[15] = host
	return netip.PrefixFrom(netip.AddrFrom16(b), p.Bits())
}

func TestPrefixLifecycle(t *testing.T) {
	s := globalOnly("eth0")
	steps := []struct {
		name string
		at   time.Duration
		do   func(now time.Time)
		want string
	}{
		{"nothing seen yet", 0, func(time.Time) {}, "v1;eth0="},
		{"RA brings A", 0, func(now time.Time) {
			s.RA("eth0", routerA, now, []RAPrefix{{pA, time.Hour, 30 * time.Minute, true}})
		}, "v1;eth0=2001:db8:a::/64 p ra"},
		{"SLAAC address in A", time.Second, func(now time.Time) {
			s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, now)
		}, "v1;eth0=2001:db8:a::/64 p ra"},
		{"RA refreshes change nothing", 4 * time.Second, func(now time.Time) {
			s.RA("eth0", routerA, now, []RAPrefix{{pA, time.Hour, 30 * time.Minute, true}})
			s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, now)
		}, "v1;eth0=2001:db8:a::/64 p ra"},
		{"renumbering: B preferred, A deprecated by both sources", 10 * time.Second, func(now time.Time) {
			s.RA("eth0", routerA, now, []RAPrefix{{pB, time.Hour, 30 * time.Minute, true}, {pA, 1800 * time.Second, 0, true}})
			s.Address("eth0", Address{Addr: addr(pA, 1), Valid: 1800 * time.Second, Preferred: 0}, false, now)
		}, "v1;eth0=2001:db8:a::/64 d1800 ra,2001:db8:b::/64 p ra"},
		{"later RAs count A down: the frozen lifetime stays", 100 * time.Second, func(now time.Time) {
			s.RA("eth0", routerA, now, []RAPrefix{{pB, time.Hour, 30 * time.Minute, true}, {pA, 1710 * time.Second, 0, true}})
		}, "v1;eth0=2001:db8:a::/64 d1800 ra,2001:db8:b::/64 p ra"},
		{"router withdraws A (valid 0): the address still holds it", 110 * time.Second, func(now time.Time) {
			s.RA("eth0", routerA, now, []RAPrefix{{pA, 0, 0, true}})
		}, "v1;eth0=2001:db8:a::/64 d1800 addr,2001:db8:b::/64 p ra"},
		{"the kernel removes the address: A is gone", 120 * time.Second, func(now time.Time) {
			s.Address("eth0", Address{Addr: addr(pA, 1)}, true, now)
		}, "v1;eth0=2001:db8:b::/64 p ra"},
		{"B's preferred lifetime runs out without refresh", 121*time.Second + 30*time.Minute, func(time.Time) {},
			"v1;eth0=2001:db8:b::/64 d1779 ra"}, // last RA at 100 s: 3600-1821 left
		{"B's valid lifetime runs out", 121*time.Second + time.Hour, func(time.Time) {}, "v1;eth0="},
	}
	for _, st := range steps {
		now := t0.Add(st.at)
		st.do(now)
		if got := encode(t, s, now); got != st.want {
			t.Fatalf("%s:\n got %s\nwant %s", st.name, got, st.want)
		}
	}
	if _, ok := s.NextDeadline(t0.Add(2 * time.Hour)); ok {
		t.Errorf("nothing left, yet a deadline is pending")
	}
}

func TestTwoRoutersDoNotFlap(t *testing.T) {
	s := believing(New("eth0"))
	s.RA("eth0", routerA, t0, []RAPrefix{{pA, time.Hour, time.Hour, true}})
	s.RA("eth0", routerB, t0, []RAPrefix{{pA, time.Hour, 0, true}, {pB, time.Hour, time.Hour, true}})
	want := "v1;eth0=2001:db8:a::/64 p ra,2001:db8:b::/64 p ra"
	for i := range 5 {
		now := t0.Add(time.Duration(i) * 3 * time.Second)
		// The routers alternate; neither's view wins over the other's.
		if i%2 == 0 {
			s.RA("eth0", routerB, now, []RAPrefix{{pA, time.Hour, 0, true}, {pB, time.Hour, time.Hour, true}})
		} else {
			s.RA("eth0", routerA, now, []RAPrefix{{pA, time.Hour, time.Hour, true}})
		}
		if got := encode(t, s, now); got != want {
			t.Fatalf("after RA %d: %s, want %s", i, got, want)
		}
	}
	if got, want := s.Routers("eth0", pA), []netip.Addr{routerA, routerB}; !slices.Equal(got, want) {
		t.Errorf("Routers = %v, want %v", got, want)
	}
}

func TestEventOrderDoesNotMatter(t *testing.T) {
	events := []func(s *State){
		func(s *State) { s.RA("eth0", routerA, t0, []RAPrefix{{pA, time.Hour, time.Hour, true}}) },
		func(s *State) { s.RA("eth0", routerB, t0, []RAPrefix{{pB, time.Hour, 0, true}}) },
		func(s *State) {
			s.Address("eth0", Address{Addr: addr(pA, 7), Valid: time.Hour, Preferred: time.Hour}, false, t0)
		},
		func(s *State) {
			s.Address("eth1", Address{Addr: addr(pB, 9), Valid: Infinite, Preferred: Infinite}, false, t0)
		},
	}
	var first string
	for perm := range permutations(len(events)) {
		s := believing(New("eth1", "eth0"))
		for _, i := range perm {
			events[i](s)
		}
		got := encode(t, s, t0)
		if first == "" {
			first = got
		} else if got != first {
			t.Fatalf("order %v gives %s, another gave %s", perm, got, first)
		}
	}
}

func permutations(n int) func(func([]int) bool) {
	return func(yield func([]int) bool) {
		var rec func(p []int, used []bool) bool
		rec = func(p []int, used []bool) bool {
			if len(p) == n {
				return yield(slices.Clone(p))
			}
			for i := range n {
				if !used[i] {
					used[i] = true
					if !rec(append(p, i), used) {
						return false
					}
					used[i] = false
				}
			}
			return true
		}
		rec(nil, make([]bool, n))
	}
}

func TestFilterRejectsUniqueLocal(t *testing.T) {
	s := globalOnly("eth0")
	s.RA("eth0", routerA, t0, []RAPrefix{{ula, time.Hour, time.Hour, true}})
	s.Address("eth0", Address{Addr: addr(ula, 1), Valid: Infinite, Preferred: Infinite}, false, t0)
	n, rejected := s.Snapshot(t0)
	if got, _ := digest.Encode(n); got != "v1;eth0=" {
		t.Errorf("digest = %s, want the ULA left out", got)
	}
	if len(rejected) != 1 || rejected[0].Prefix != ula {
		t.Errorf("rejected = %v, want [%s]", rejected, ula)
	}
}

func TestSeedKeepsPublishedLifetimeAcrossRestart(t *testing.T) {
	published := "v1;eth0=2001:db8:a::/64 d1800 ra"
	prev, err := digest.Decode(published)
	if err != nil {
		t.Fatal(err)
	}
	s := believing(New("eth0"))
	s.Seed(prev)
	// After a restart the router says only 1500 s are left.
	s.RA("eth0", routerA, t0, []RAPrefix{{pA, 1500 * time.Second, 0, true}})
	if got := encode(t, s, t0); got != published {
		t.Errorf("after restart %s, want the published %s", got, published)
	}
}

func TestSnapshotIsBounded(t *testing.T) {
	s := believing(New("eth0"))
	var pios []RAPrefix
	for i := range digest.MaxPrefixes + 8 {
		p := netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/64", i))
		preferred := time.Hour
		if i < 8 {
			preferred = 0 // the first eight are deprecated: they go first
		}
		pios = append(pios, RAPrefix{p, time.Hour, preferred, true})
	}
	s.RA("eth0", routerA, t0, pios)
	n, rejected := s.Snapshot(t0)
	if _, err := digest.Encode(n); err != nil {
		t.Fatalf("a flood of prefixes made an unencodable digest: %v", err)
	}
	if len(rejected) != 8 {
		t.Fatalf("rejected %d, want 8", len(rejected))
	}
	for _, r := range rejected {
		if !errors.Is(r.Reason, ErrTooMany) || r.Prefix.Addr().As16()[5] >= 8 {
			t.Errorf("dropped %s (%v), want only the deprecated ones", r.Prefix, r.Reason)
		}
	}
}

func TestRoutersDecideTheSource(t *testing.T) {
	s := believing(New("eth0"))
	if s.SawRA() {
		t.Fatal("SawRA before any RA")
	}
	// A static address in a prefix no router advertises is reported by it.
	s.Address("eth0", Address{Addr: addr(pB, 1), Valid: Infinite, Preferred: Infinite}, false, t0)
	s.RA("eth0", routerA, t0, []RAPrefix{{pA, time.Hour, time.Hour, true}})
	if !s.SawRA() {
		t.Fatal("SawRA false after an RA")
	}
	want := "v1;eth0=2001:db8:a::/64 p ra,2001:db8:b::/64 p addr"
	if got := encode(t, s, t0); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	// The SLAAC address in A appears after DAD: the digest does not change, so a
	// change is one publication without waiting for it.
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: time.Hour}, false, t0.Add(2*time.Second))
	if got := encode(t, s, t0.Add(2*time.Second)); got != want {
		t.Errorf("the address changed the digest:\n got %s\nwant %s", got, want)
	}
}

func TestNextDeadlineIsInTheFuture(t *testing.T) {
	s := believing(New("eth0"))
	s.RA("eth0", routerA, t0, []RAPrefix{{pA, time.Hour, time.Minute, true}})
	if at, ok := s.NextDeadline(t0); !ok || !at.Equal(t0.Add(time.Minute)) {
		t.Errorf("NextDeadline = %v %v, want the preferred lifetime's end", at, ok)
	}
	// Once deprecated, the passed preferred deadline must not be offered again.
	if at, ok := s.NextDeadline(t0.Add(2 * time.Minute)); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Errorf("NextDeadline = %v %v, want the valid lifetime's end", at, ok)
	}
}

func TestLinkFlapKeepsFlushedAddresses(t *testing.T) {
	// Prefixes known only by their addresses (no router advertises them here):
	// the addresses decide, so their flush on link down must not count.
	s := believing(New("eth0"))
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: time.Hour}, false, t0)
	s.Address("eth0", Address{Addr: addr(pB, 1), Valid: time.Hour, Preferred: time.Hour}, false, t0)
	want := encode(t, s, t0)

	// The link goes down: the kernel flushes both addresses.
	s.Link("eth0", false, t0.Add(time.Second))
	s.Address("eth0", Address{Addr: addr(pA, 1)}, true, t0.Add(time.Second))
	s.Address("eth0", Address{Addr: addr(pB, 1)}, true, t0.Add(time.Second))
	if got := encode(t, s, t0.Add(5*time.Second)); got != want {
		t.Fatalf("while down: %s, want %s", got, want)
	}
	// Up again; the kernel re-creates A only.
	up := t0.Add(6 * time.Second)
	s.Link("eth0", true, up)
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: time.Hour}, false, up.Add(4*time.Second))
	if got := encode(t, s, up.Add(4*time.Second)); got != want {
		t.Fatalf("during the grace: %s, want %s", got, want)
	}
	if at, ok := s.NextDeadline(up.Add(4 * time.Second)); !ok || !at.Equal(up.Add(DefaultLinkGrace)) {
		t.Errorf("NextDeadline = %v, want the end of the grace", at)
	}
	// B's address never came back: after the grace B is gone.
	if got, want := encode(t, s, up.Add(DefaultLinkGrace)), "v1;eth0=2001:db8:a::/64 p addr"; got != want {
		t.Errorf("after the grace: %s, want %s", got, want)
	}
	// Removals outside a flap apply at once.
	s.Address("eth0", Address{Addr: addr(pA, 1)}, true, up.Add(time.Minute))
	if got, want := encode(t, s, up.Add(time.Minute)), "v1;eth0="; got != want {
		t.Errorf("plain removal: %s, want %s", got, want)
	}
}

func TestARouterThatStopsOfferingAPrefixDeprecatesIt(t *testing.T) {
	ra := func(s *State, at time.Duration, ps ...netip.Prefix) {
		var pios []RAPrefix
		for _, p := range ps {
			pios = append(pios, RAPrefix{p, time.Hour, 30 * time.Minute, true})
		}
		s.RA("eth0", routerA, t0.Add(at), pios)
	}
	s := believing(New("eth0"))
	ra(s, 0, pA)
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, t0)
	// The router reboots onto a new ISP prefix and never mentions A again; the
	// kernel keeps A's address preferred for another 30 minutes.
	ra(s, 10*time.Second, pB)
	want := "v1;eth0=2001:db8:a::/64 d3590 ra,2001:db8:b::/64 p ra"
	if got := encode(t, s, t0.Add(10*time.Second)); got != want {
		t.Fatalf("after the reboot:\n got %s\nwant %s", got, want)
	}
	ra(s, 14*time.Second, pB)
	if got := encode(t, s, t0.Add(14*time.Second)); got != want {
		t.Errorf("the next RA changed the digest:\n got %s\nwant %s", got, want)
	}
	// A coming back (the ISP returns the old prefix) is preferred again.
	ra(s, 20*time.Second, pA, pB)
	if got, want := encode(t, s, t0.Add(20*time.Second)), "v1;eth0=2001:db8:a::/64 p ra,2001:db8:b::/64 p ra"; got != want {
		t.Errorf("A back:\n got %s\nwant %s", got, want)
	}

	// Off, for routers that split their prefixes over several RAs.
	s = believing(New("eth0"))
	s.OmitDeprecates = false
	ra(s, 0, pA)
	ra(s, 3*time.Second, pB)
	if got, want := encode(t, s, t0.Add(3*time.Second)), "v1;eth0=2001:db8:a::/64 p ra,2001:db8:b::/64 p ra"; got != want {
		t.Errorf("with OmitDeprecates off:\n got %s\nwant %s", got, want)
	}
}

func TestRoutersDecideOverAddresses(t *testing.T) {
	s := believing(New("eth0"))
	// A static address in a prefix no router advertises: its own lifetimes decide.
	s.Address("eth0", Address{Addr: addr(pB, 1), Valid: Infinite, Preferred: Infinite}, false, t0)
	// A router deprecates A while an address in A is still preferred.
	s.RA("eth0", routerA, t0, []RAPrefix{{pA, time.Hour, 0, true}})
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: time.Hour}, false, t0)
	if got, want := encode(t, s, t0), "v1;eth0=2001:db8:a::/64 d3600 ra,2001:db8:b::/64 p addr"; got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	// The kernel keeps an address's valid lifetime when an RA shortens it below two
	// hours (RFC 4862 5.5.3 e); the router's 20 s is what is published.
	s = believing(New("eth0"))
	s.RA("eth0", routerA, t0, []RAPrefix{{pA, 20 * time.Second, 0, true}})
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: 600 * time.Second}, false, t0)
	if got, want := encode(t, s, t0), "v1;eth0=2001:db8:a::/64 d20 ra"; got != want {
		t.Errorf("shortened lifetime:\n got %s\nwant %s", got, want)
	}
}
