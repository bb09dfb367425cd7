package observe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
)

// The seed's cap is a deadline: Snapshot turns the prefix deprecated when
// it passes, so NextDeadline names it, or the agent (which sleeps until the
// next event or NextDeadline) would publish the change only at the next
// unrelated event (found by a red team). After a restart the kernel's address in A is first seen
// preferred for 29 min (the cap); a host's RA under its own address (the
// agent, trusting only the router, records nothing of it) then makes the
// kernel's address preferred for ever, and the router's words are lost. The
// address's own deadlines are gone, and so is the cap's.
func TestTheSeedsCapIsADeadline(t *testing.T) {
	restart := t0.Add(10 * time.Minute)
	seed := mustSnapshot(agreed(t), restart)
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerA}}})
	s.Seed(seed)
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 29 * time.Minute}, false, restart)
	refreshed := restart.Add(time.Minute)
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: Infinite, Preferred: Infinite}, false, refreshed)
	capEnd := restart.Add(29 * time.Minute)
	if !preferredIn(mustSnapshot(s, refreshed), pA.String()) {
		t.Fatalf("the scenario is off: %s at +1m", encode(t, s, refreshed))
	}
	next, ok := s.NextDeadline(refreshed)
	if preferredIn(mustSnapshot(s, capEnd), pA.String()) {
		t.Fatalf("the scenario is off: %s at the cap", encode(t, s, capEnd))
	}
	if !ok || next.After(capEnd) {
		t.Errorf("NextDeadline(+1m after the restart) = %v (ok %v); want no later than the seed's cap, %s after the restart (Snapshot turns A deprecated there)",
			next, ok, capEnd.Sub(restart))
	}
}
