package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/tools/world"
)

// delegate does on every node what a DHCPv6 client in host mode does with a
// new lease (odhcp6c, systemd-networkd, a dhclient hook): the delegated
// prefix becomes an unreachable route expiring with the lease, and the
// previous one goes - in one batch, as one client reply.
func delegate(t *testing.T, w *world.World, prefix, previous string) {
	t.Helper()
	batch := fmt.Sprintf("route replace unreachable %s expires 600\n", prefix)
	if previous != "" {
		batch += fmt.Sprintf("route del unreachable %s\n", previous)
	}
	for _, n := range w.Net.Nodes {
		cmd := exec.Command("ip", "-6", "-n", n.NS, "-batch", "-")
		cmd.Stdin = strings.NewReader(batch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: ip -batch: %v\n%s", n.Name, err, out)
		}
	}
}

// TestDelegatedPrefixHostMode: a DynamicPrefix acquiring by DHCPv6-PD follows
// the delegation the node's own DHCPv6 client installed (host mode), not the
// /64 the same uplink carries in RAs; status says dhcpv6-pd. A new delegation
// is one digest write per node, one pool patch and one status patch.
func TestDelegatedPrefixHostMode(t *testing.T) {
	w := newWorld(t, 2)
	advertise(t, w, prefixA) // the ISP's /64 on the uplink: not what this DynamicPrefix follows
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{"interface": "eth0"}}})
	createPool(t, w)
	const pd1, pd2 = "2001:db8:a00::/56", "2001:db8:b00::/56"
	delegate(t, w, pd1, "")
	for _, n := range []string{"node1", "node2"} {
		startAgent(t, w, n)
	}
	startWriter(t, w, "writer-a")
	poolIs(t, w, "pool follows the delegation", pd1)
	eventually(t, "status", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == pd1 && st.PrefixSource == "dhcpv6-pd" && condition(st, "Degraded") == "False Healthy",
			fmt.Sprintf("%s %s %s", st.CurrentPrefix, st.PrefixSource, condition(st, "Degraded"))
	})

	settleWrites()
	m := mark(t, w)
	delegate(t, w, pd2, pd1)
	poolIs(t, w, "pool follows the new delegation", pd2)
	settleWrites()
	onePatchPerNode(t, writesBy(t, w, m, agentUser), "node1", "node2")
	want := []string{"patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200"}
	if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
		t.Errorf("writer writes for a new delegation: %q, want %q", got, want)
	}
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != pd2 || st.PrefixSource != "dhcpv6-pd" {
		t.Errorf("status %s (%s)", st.CurrentPrefix, st.PrefixSource)
	}
}

// TestDHCPv6PDWithARealServer: ISC dhcpd in the router delegates /56s from a
// pool; ISC dhclient on node1 (host mode, its hook installs the delegation as
// an unreachable route) gets one, and the DynamicPrefix follows it. The ISP
// renumbers - the server restarts with another pool, every lease forgotten -
// and the pool follows the client's new delegation.
func TestDHCPv6PDWithARealServer(t *testing.T) {
	w := newWorld(t, 2)
	ctx := t.Context()
	advertise(t, w, prefixA)
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 40 * time.Second, Preferred: 20 * time.Second}
	if err := w.Net.Router.DelegatePrefixes(ctx, first); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{"interface": "eth0"}}})
	createPool(t, w)
	for _, n := range []string{"node1", "node2"} {
		startAgent(t, w, n)
	}
	startWriter(t, w, "writer-a")
	if _, err := w.RequestDelegation("node1"); err != nil {
		t.Fatal(err)
	}
	following := func(what string, pool netip.Prefix) netip.Prefix {
		t.Helper()
		var cur netip.Prefix
		// The client asks again at its renewal time (half the preferred
		// lifetime), and after a NoBinding solicits anew.
		eventuallyWithin(t, 2*time.Minute, what, func() (bool, string) {
			st := dpStatus(t, w, "home")
			p, err := netip.ParsePrefix(st.CurrentPrefix)
			if err != nil || !pool.Contains(p.Addr()) || p.Bits() != 56 || st.PrefixSource != "dhcpv6-pd" {
				return false, st.CurrentPrefix + " " + st.PrefixSource
			}
			cur = p
			b := blocks(t, w, "lb")
			return slices.Equal(b, []string{"192.0.2.0/24", p.String()}), fmt.Sprint(b)
		})
		return cur
	}
	p1 := following("the first delegation", first.Pool)

	settleWrites()
	m := mark(t, w)
	second := first
	second.Pool = netip.MustParsePrefix("2001:db8:b00::/52")
	if err := w.Net.Router.DelegatePrefixes(ctx, second); err != nil {
		t.Fatal(err)
	}
	p2 := following("the delegation after the ISP renumbered", second.Pool)
	t.Logf("delegations: %s, then %s", p1, p2)
	// One pool patch for the renumbering. Status: one patch, or two when the
	// client's old lease ran out before the new one came (a quiet spell the
	// status reports); nothing else.
	settleWrites()
	var pools, statuses int
	for _, wr := range objectWrites(writesBy(t, w, m, writerUser)) {
		switch wr {
		case "patch ciliumloadbalancerippools lb 200":
			pools++
		case "patch dynamicprefixes/status home 200":
			statuses++
		default:
			t.Errorf("unexpected write %s", wr)
		}
	}
	if pools != 1 || statuses < 1 || statuses > 2 {
		t.Errorf("%d pool and %d status patches for one renumbering, want 1 and 1-2", pools, statuses)
	}
}
