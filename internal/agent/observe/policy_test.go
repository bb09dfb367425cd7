package observe

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

// With trusted routers, an RA from any other router is not believed, and an
// address the kernel formed from it is not reported either; an address in a
// prefix a trusted router advertised still counts after that router's RA ran
// out (the router rebooting is not a renumbering).
func TestTrustedRouters(t *testing.T) {
	rogue, pR := netip.MustParseAddr("fe80::666"), netip.MustParsePrefix("2001:db8:666::/64")
	s := New(nil, "eth0")
	s.SetPolicies(map[string]Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerA}}})
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
	s.SetPolicies(map[string]Policy{"eth0": {GlobalOnly: true}})
	if node, _ = s.Snapshot(t0.Add(2 * time.Minute)); len(node.Links[0].Prefixes) != 2 {
		t.Errorf("no trust list: %+v", node)
	}
}

func TestPolicyLengthBounds(t *testing.T) {
	pol := Policy{GlobalOnly: true, MinLength: 48, MaxLength: 64}
	for p, ok := range map[string]bool{"2001:db8::/48": true, "2001:db8::/64": true, "2001:db8::/32": false, "2001:db8::/80": false, "fd00::/64": false} {
		if err := pol.Check("eth0", netip.MustParsePrefix(p)); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", p, err, ok)
		}
	}
}
