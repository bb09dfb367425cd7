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

// With trusted routers, an RA from any other router is not believed, and an
// address the kernel formed from it is not reported either; an address in a
// prefix a trusted router advertised still counts after that router's RA ran
// out (the router rebooting is not a renumbering).
func TestTrustedRouters(t *testing.T) {
	rogue, pR := netip.MustParseAddr("fe80::666"), netip.MustParsePrefix("2001:db8:666::/64")
	s := believing(New("eth0"))
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerA}}})
	if !s.RA("eth0", routerA, t0, []RAPrefix{{pA, time.Minute, time.Minute, true}}) {
		t.Fatal("the trusted router's RA was not believed")
	}
	if s.RA("eth0", rogue, t0, []RAPrefix{{pR, time.Hour, time.Hour, true}}) {
		t.Fatal("a rogue RA was believed")
	}
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: time.Hour}, false, t0)
	s.Address("eth0", Address{Addr: addr(pR, 1), Valid: time.Hour, Preferred: time.Hour}, false, t0)
	node, rejected := s.Snapshot(t0)
	if len(node.Links) != 1 || len(node.Links[0].Prefixes) != 1 || node.Links[0].Prefixes[0].Prefix != pA {
		t.Errorf("digest %+v, want the trusted router's prefix alone", node)
	}
	if len(rejected) != 1 || rejected[0].Prefix != pR || !errors.Is(rejected[0].Reason, ErrUntrusted) {
		t.Errorf("rejected %+v, want the rogue prefix, untrusted", rejected)
	}
	// The trusted router's RA runs out; its address still counts.
	node, _ = s.Snapshot(t0.Add(2 * time.Minute))
	if len(node.Links[0].Prefixes) != 1 || node.Links[0].Prefixes[0].Prefix != pA {
		t.Errorf("after the RA ran out: %+v", node)
	}
	// Every router trusted again: the rogue's address is reported (by the kernel).
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true}})
	if node, _ = s.Snapshot(t0.Add(2 * time.Minute)); len(node.Links[0].Prefixes) != 2 {
		t.Errorf("no trust list: %+v", node)
	}
}

// More prefixes than a digest holds: a flood of fresh prefixes from another
// host crowds out neither the current prefix, nor a renumbering from the real
// router, nor what drains; among draining prefixes the oldest go first.
func TestEvictionKeepsTheRealRoutersPrefixes(t *testing.T) {
	s := globalOnly("eth0")
	p := func(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/64", i)) }
	// The real router: p(1) current, p(2)..p(4) draining, the newest with the
	// most valid lifetime left.
	ras := []RAPrefix{{p(1), time.Hour, time.Hour, true}}
	for i := 2; i <= 4; i++ {
		ras = append(ras, RAPrefix{p(i), time.Duration(10*i) * time.Minute, 0, true})
	}
	s.RA("eth0", routerA, t0, ras)
	s.Snapshot(t0)
	flooder := netip.MustParseAddr("fe80::bad")
	later := t0.Add(time.Minute) // the flood starts after the home router was heard
	for i := 0x100; i < 0x100+digest.MaxPrefixes; i++ {
		s.RA("eth0", flooder, later, []RAPrefix{{p(i), time.Hour, time.Hour, true}})
		s.Snapshot(later) // the flood fills the digest before it overflows
	}
	// A real renumbering during the flood: p(5) new, p(1) deprecated.
	s.RA("eth0", routerA, later, append([]RAPrefix{{p(5), time.Hour, time.Hour, true}, {p(1), 50 * time.Minute, 0, true}}, ras[1:]...))
	node, rejected := s.Snapshot(later)
	kept := map[netip.Prefix]bool{}
	for _, e := range node.Links[0].Prefixes {
		kept[e.Prefix] = true
	}
	for i := 1; i <= 5; i++ {
		if !kept[p(i)] {
			t.Errorf("the real router's %s was evicted", p(i))
		}
	}
	if len(node.Links[0].Prefixes) != digest.MaxPrefixes || len(rejected) != 5 {
		t.Errorf("%d kept, %d rejected: want the digest full and 5 of the flood out", len(node.Links[0].Prefixes), len(rejected))
	}

	// A burst of real renumberings within one valid lifetime: the oldest
	// draining prefix goes first.
	b := globalOnly("eth0")
	var burst []RAPrefix
	for i := range digest.MaxPrefixes + 2 {
		burst = append(burst, RAPrefix{p(0x200 + i), time.Duration(i+1) * time.Minute, 0, true})
	}
	burst = append(burst, RAPrefix{p(0x300), time.Hour, time.Hour, true})
	b.RA("eth0", routerA, t0, burst)
	node, rejected = b.Snapshot(t0)
	if len(rejected) != 3 || rejected[0].Prefix != p(0x200) || rejected[1].Prefix != p(0x201) || rejected[2].Prefix != p(0x202) {
		t.Errorf("rejected %v: want the three closest to expiry", rejected)
	}
	if len(node.Links[0].Prefixes) != digest.MaxPrefixes {
		t.Errorf("%d kept", len(node.Links[0].Prefixes))
	}

	// The same burst as a router makes it: every prefix advertised with the
	// same lifetimes, each RA the new prefix and the one it replaces
	// (deprecated); older ones omitted. Each was frozen at the same valid
	// lifetime when deprecated; what is left of it now differs, and the
	// oldest goes first.
	r := globalOnly("eth0")
	at := t0
	const n = digest.MaxPrefixes + 4
	for i := range n {
		ra := []RAPrefix{{p(0x400 + i), 10 * time.Minute, 5 * time.Minute, true}}
		if i > 0 {
			ra = append(ra, RAPrefix{p(0x400 + i - 1), 10 * time.Minute, 0, true})
		}
		r.RA("eth0", routerA, at, ra)
		node, rejected = r.Snapshot(at)
		at = at.Add(time.Second)
	}
	var dropped []netip.Prefix
	for _, x := range rejected {
		dropped = append(dropped, x.Prefix)
	}
	if want := []netip.Prefix{p(0x400), p(0x401), p(0x402), p(0x403)}; !slices.Equal(dropped, want) {
		t.Errorf("a router's burst: dropped %v, want the four oldest %v", dropped, want)
	}
}

// A prefix delegated to the node (DHCPv6-PD, host mode) is reported on the
// links that ask for delegations, preferred, whatever the trusted routers,
// until its lifetime runs out or its route goes; other links do not see it.
func TestDelegatedPrefixes(t *testing.T) {
	pd := netip.MustParsePrefix("2001:db8:a00::/56")
	s := believing(New("wan", "eth0"))
	s.SetPolicies(map[string]policy.Policy{"wan": {GlobalOnly: true, Delegated: true, Trusted: []netip.Addr{routerA}}, "eth0": {GlobalOnly: true}})
	s.Delegated(pd, time.Minute, false, t0)
	s.Delegated(netip.MustParsePrefix("fd00:1::/56"), time.Hour, false, t0)
	node, rejected := s.Snapshot(t0)
	want := digest.Node{Links: []digest.Link{{Name: "eth0"}, {Name: "wan", Prefixes: []digest.Prefix{{Prefix: pd, Sources: digest.SourcePD}}}}}
	if fmt.Sprint(node) != fmt.Sprint(want) {
		t.Errorf("digest %+v, want %+v", node, want)
	}
	if len(rejected) != 1 || rejected[0].Prefix.String() != "fd00:1::/56" {
		t.Errorf("rejected %+v, want the ULA delegation (global unicast only)", rejected)
	}
	if next, ok := s.NextDeadline(t0); !ok || !next.Equal(t0.Add(time.Minute)) {
		t.Errorf("next deadline %v, want the delegation's end", next)
	}
	if node, _ := s.Snapshot(t0.Add(time.Minute)); len(node.Links[1].Prefixes) != 0 {
		t.Errorf("after its lifetime: %+v", node)
	}
	s.Delegated(pd, Infinite, false, t0)
	s.Delegated(pd, 0, true, t0.Add(time.Second))
	if node, _ := s.Snapshot(t0.Add(time.Second)); len(node.Links[1].Prefixes) != 0 {
		t.Errorf("after its route went: %+v", node)
	}
}
