package e2e

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// TestDHCPv6PDARogueServerDoesNotWinThroughTheRotation: three nodes, ISC
// dhcpd delegating, no trustedServers. Once its delegation is current and
// confirmed, a second ISC dhcpd (the rogue router's namespace, its own DUID,
// Preference 255, another pool) starts answering. The confirmers' probes
// hear two servers: they offer nothing, the link is reported in conflict,
// and past --dhcpv6-confirm-within the rotation has nothing to back. Before
// the two-server rule the confirmers were offered the rogue's /56, two of
// them backed it, the client role moved to a node whose Solicit the rogue
// won, and its /56 was current, confirmed.
func TestDHCPv6PDARogueServerDoesNotWinThroughTheRotation(t *testing.T) {
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 60 * time.Second, Preferred: 30 * time.Second}
	w, _, _ := pdClientWorld(t, 3, first, "--dhcpv6-confirm-within", "30s")
	ctx := t.Context()
	p1, client, confirmer := delegationConfirmed(t, w)
	t.Logf("%s: client %s, confirmer %s", p1, client, confirmer)

	rogue := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:f000::/52"), Length: 56, Valid: 600 * time.Second, Preferred: 300 * time.Second,
		Name: "rogue", Preference: 255}
	r, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.DelegatePrefixes(ctx, rogue); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	// Three bounds and more: before, the rogue's /56 was current within
	// two (the offer's T1, 15 s, then a rotation and a takeover).
	var clients, conflict []string
	for time.Since(started) < 3*time.Minute {
		st := dpStatus(t, w, "home")
		cur, _ := netip.ParsePrefix(st.CurrentPrefix)
		if rogue.Pool.Contains(cur.Addr()) {
			t.Fatalf("%v after the rogue started: current %s, dhcpv6pd %+v", time.Since(started).Round(time.Second), cur, st.DHCPv6PD)
		}
		if st.DHCPv6PD != nil && !slices.Contains(clients, st.DHCPv6PD.ClientNode) {
			clients = append(clients, st.DHCPv6PD.ClientNode)
		}
		if c := condition(st, render.RouterConflict); !slices.Contains(conflict, c) {
			conflict = append(conflict, c)
		}
		time.Sleep(500 * time.Millisecond)
	}
	st := dpStatus(t, w, "home")
	t.Logf("3 min after the rogue started: current %s, dhcpv6pd %+v; clients %q, RouterConflict %q", st.CurrentPrefix, st.DHCPv6PD, clients, conflict)
	if st.CurrentPrefix != p1.String() {
		t.Errorf("current %s, want %s kept", st.CurrentPrefix, p1)
	}
	if !slices.Contains(conflict, "True RouterConflict") {
		t.Errorf("RouterConflict was %q, never True", conflict)
	}
	if !slices.Equal(clients, []string{client}) {
		t.Errorf("clients %q, want %s throughout", clients, client)
	}
}
