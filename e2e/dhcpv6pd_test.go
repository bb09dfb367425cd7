package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/render"
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
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{"interface": "eth0", "mode": "host"}}})
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
// and the pool follows the client's new delegation. Then node1 dies and a
// standby client on node2 (another DUID: another delegation) takes over: once
// node1's report lapses, the pool follows node2's delegation.
func TestDHCPv6PDWithARealServer(t *testing.T) {
	w := newWorld(t, 2)
	ctx := t.Context()
	advertise(t, w, prefixA)
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 40 * time.Second, Preferred: 20 * time.Second}
	if err := w.Net.Router.DelegatePrefixes(ctx, first); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{"interface": "eth0", "mode": "host"}}})
	createPool(t, w)
	node1 := startAgent(t, w, "node1")
	startAgent(t, w, "node2")
	startWriter(t, w, "writer-a", "--node-not-ready-grace", "10s")
	client1, err := w.RequestDelegation("node1")
	if err != nil {
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

	// node1 dies with its client; the standby client on node2 asks.
	w.Stop(client1, 5*time.Second)
	w.Stop(node1, 5*time.Second)
	notReady(t, w, "node1")
	if _, err := w.RequestDelegation("node2"); err != nil {
		t.Fatal(err)
	}
	waitDigest(t, w, "node2", "reports its own client's delegation", func(n digest.Node) bool {
		for _, l := range n.Links {
			for _, e := range l.Prefixes {
				if e.Sources&digest.SourcePD != 0 && e.Prefix != p2 && second.Pool.Contains(e.Prefix.Addr()) {
					return true
				}
			}
		}
		return false
	})
	eventually(t, "the pool follows node2's delegation once node1's report lapsed", func() (bool, string) {
		st := dpStatus(t, w, "home")
		b := blocks(t, w, "lb")
		return st.CurrentPrefix != p2.String() && len(b) == 2 && b[1] == st.CurrentPrefix, fmt.Sprint(st.CurrentPrefix, b)
	})
}

// notReady sets node's Ready condition False, as its kubelet stopping would.
func notReady(t *testing.T, w *world.World, node string) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Test","message":"set by the test",`+
		`"lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`, now, now)
	if _, err := w.API.Client.CoreV1().Nodes().Patch(t.Context(), node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestDHCPv6PDBuiltInClient: the agents' own DHCPv6 client (mode client, the
// default) against ISC dhcpd in the router. The writer names one node to run
// it and another to confirm its delegation (soliciting, never requesting);
// their renewals and probes, and the server rebooting with its leases, write
// nothing. The client's node dies: the client moves at once to another node,
// whose agent asks as the same client and gets the same prefix back, so no
// pool is written and the prefix is never reported missing. The ISP
// renumbers (the server restarts with another pool, its leases forgotten):
// the next renewal is answered NoBinding or with the new prefix, the
// confirmer is offered it alike, and the pool follows. Three nodes: with two,
// one dead, nobody would confirm the renumbering (docs/security.md).
func TestDHCPv6PDBuiltInClient(t *testing.T) {
	w := newWorld(t, 3)
	ctx := t.Context()
	advertise(t, w, prefixA) // the /64 on the uplink: not what this DynamicPrefix follows
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 60 * time.Second, Preferred: 30 * time.Second}
	if err := w.Net.Router.DelegatePrefixes(ctx, first); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{"interface": "eth0"}}})
	createPool(t, w)
	agents := map[string]*exec.Cmd{"node1": startAgent(t, w, "node1"), "node2": startAgent(t, w, "node2"), "node3": startAgent(t, w, "node3")}
	startWriter(t, w, "writer-a", "--node-not-ready-grace", "10s")

	// following waits for the status to name a delegation from pool, run on
	// client ("": whichever node the writer named), and for the pool to hold
	// it; it returns the prefix and the client's node.
	following := func(what string, pool netip.Prefix, client string) (netip.Prefix, string) {
		t.Helper()
		var cur netip.Prefix
		var ran string
		eventuallyWithin(t, 2*time.Minute, what, func() (bool, string) {
			st := dpStatus(t, w, "home")
			p, err := netip.ParsePrefix(st.CurrentPrefix)
			node := ""
			if st.DHCPv6PD != nil {
				node = st.DHCPv6PD.ClientNode
			}
			if err != nil || !pool.Contains(p.Addr()) || p.Bits() != 56 || st.PrefixSource != "dhcpv6-pd" || node == "" || (client != "" && node != client) {
				return false, fmt.Sprintf("%s %s client %q", st.CurrentPrefix, st.PrefixSource, node)
			}
			cur, ran = p, node
			b := blocks(t, w, "lb")
			return slices.Equal(b, []string{"192.0.2.0/24", p.String()}), fmt.Sprint(b)
		})
		return cur, ran
	}
	quiet := func(what string, m world.Mark) {
		t.Helper()
		settleWrites()
		if got := writesBy(t, w, m, agentUser); len(got) > 0 {
			t.Errorf("%s: agent writes %v, want none", what, got)
		}
		if got := objectWrites(writesBy(t, w, m, writerUser)); len(got) > 0 {
			t.Errorf("%s: writer writes %q, want none", what, got)
		}
	}
	renewals := func() int { return countLog(w, "rt-dhcpd.log", "Renew message from") }

	// Which node the writer names depends on whose digest it read first.
	p1, client := following("a node's client is delegated a prefix", first.Pool, "")
	waitDigest(t, w, client, "reports the delegation", delegated(p1))
	for _, other := range []string{"node1", "node2", "node3"} {
		v, _ := annotation(t, w, other)
		if n, err := digest.Decode(v); other != client && (err != nil || delegated(p1)(n)) {
			t.Errorf("%s's digest %q reports %s delegated: only the client's node holds the delegation", other, v, p1)
		}
	}

	settleWrites()
	m := mark(t, w)
	before := renewals()
	eventuallyWithin(t, time.Minute, "two renewals (T1: 15 s)", func() (bool, string) {
		return renewals() >= before+2, fmt.Sprint(renewals() - before)
	})
	quiet("renewals", m)

	m = mark(t, w)
	if err := w.Net.Router.RestartDHCPServer(ctx); err != nil {
		t.Fatal(err)
	}
	before = renewals()
	eventuallyWithin(t, time.Minute, "a renewal with the restarted server", func() (bool, string) {
		return renewals() > before, ""
	})
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != p1.String() {
		t.Errorf("after the server's restart: %s, want %s kept", st.CurrentPrefix, p1)
	}
	quiet("the server's restart", m)

	// The client's node dies: its agent stops and its Node goes NotReady.
	m = mark(t, w)
	w.Stop(agents[client], 5*time.Second)
	notReady(t, w, client)
	var other string
	eventuallyWithin(t, time.Minute, "another node takes the client over", func() (bool, string) {
		if st := dpStatus(t, w, "home"); st.DHCPv6PD != nil && st.DHCPv6PD.ClientNode != client {
			other = st.DHCPv6PD.ClientNode
			return true, ""
		}
		return false, ""
	})
	if p, _ := following("the other node holds the delegation", first.Pool, other); p != p1 {
		t.Errorf("after the failover the server delegated %s, want %s again (same DUID and IAID)", p, p1)
	}
	waitDigest(t, w, other, "reports the delegation", delegated(p1))
	waitLog(t, w, "writer-a.log", "its digest no longer votes", 1) // the dead node's report lapsed: the other's holds the prefix
	settleWrites()
	// The client moved when its node went NotReady, while that node still voted:
	// the prefix was never unreported, so status writes say where the client
	// and the confirmer run (and, while the new client asks, that it holds
	// nothing yet), and nothing else changes.
	for _, wr := range objectWrites(writesBy(t, w, m, writerUser)) {
		if wr != "patch dynamicprefixes/status home 200" {
			t.Errorf("failover: writer wrote %s, want status patches alone", wr)
		}
	}
	for _, wr := range writesBy(t, w, m, agentUser) {
		if wr.Verb != "patch" || wr.Resource != "nodes" || wr.Code != 200 {
			t.Errorf("failover: agent wrote %s", wr)
		}
	}
	if n := countLog(w, "writer-a.log", "any more (has the router gone quiet?)"); n != 0 {
		t.Errorf("the writer reported the prefix unreported during the failover (%d lines)", n)
	}

	m = mark(t, w)
	second := first
	second.Pool = netip.MustParsePrefix("2001:db8:b00::/52")
	if err := w.Net.Router.DelegatePrefixes(ctx, second); err != nil {
		t.Fatal(err)
	}
	p2, _ := following("the delegation after the ISP renumbered", second.Pool, "")
	t.Logf("delegations: %s, then %s", p1, p2)
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
	if pools != 1 {
		t.Errorf("%d pool patches for one renumbering, want 1", pools)
	}
	t.Logf("the renumbering: %d pool patch, %d status patches, agents %v", pools, statuses, writesBy(t, w, m, agentUser))
}

// delegated: the digest shows p delegated (source pd) on eth0.
func delegated(p netip.Prefix) func(digest.Node) bool {
	return func(n digest.Node) bool {
		for _, l := range n.Links {
			if l.Name == "eth0" && slices.ContainsFunc(l.Prefixes, func(e digest.Prefix) bool { return e.Prefix == p && e.Sources&digest.SourcePD != 0 }) {
				return true
			}
		}
		return false
	}
}

// TestTheSchemaServesTheDHCPv6PDFields: the API server refuses a mode that is
// neither client nor host and a requested length outside 48..64, defaults
// the mode to client (the existing operator's objects mean "request the
// delegation"), and keeps nodeNames and status.dhcpv6pd.
func TestTheSchemaServesTheDHCPv6PDFields(t *testing.T) {
	w := newWorldWith(t, 0, true)
	dps := w.API.Dynamic.Resource(api.GVR)
	create := func(name string, pd map[string]any) error {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"acquisition": map[string]any{"dhcpv6pd": pd}},
		}}
		_, err := dps.Create(t.Context(), u, metav1.CreateOptions{})
		return err
	}
	for name, pd := range map[string]map[string]any{
		"bad-mode":     {"interface": "eth0", "mode": "relay"},
		"too-long":     {"interface": "eth0", "requestedPrefixLength": 72},
		"no-interface": {"mode": "client"},
	} {
		if err := create(name, pd); err == nil || !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want Invalid", name, err)
		}
	}
	if err := create("home", map[string]any{"interface": "eth0", "nodeNames": []any{"node2", "node1"}}); err != nil {
		t.Fatalf("a good DynamicPrefix refused: %v", err)
	}
	u, err := dps.Get(t.Context(), "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, "node2", "status", "dhcpv6pd", "clientNode"); err != nil {
		t.Fatal(err)
	}
	if u, err = dps.UpdateStatus(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mode, _, _ := unstructured.NestedString(u.Object, "spec", "acquisition", "dhcpv6pd", "mode")
	length, _, _ := unstructured.NestedInt64(u.Object, "spec", "acquisition", "dhcpv6pd", "requestedPrefixLength")
	nodes, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "acquisition", "dhcpv6pd", "nodeNames")
	client, _, _ := unstructured.NestedString(u.Object, "status", "dhcpv6pd", "clientNode")
	if mode != "client" || length != 56 || !slices.Equal(nodes, []string{"node2", "node1"}) || client != "node2" {
		t.Errorf("stored mode %q, length %d, nodeNames %q, clientNode %q; want the defaults client and 56, and the fields kept", mode, length, nodes, client)
	}
}

// TestDHCPv6PDFollowsThePinnedServer: a second ISC dhcpd on the link (the
// rogue router's namespace) with the best Preference, 255. Without an
// allow-list the two servers are two speakers the agents cannot tell apart:
// nothing is delegated, the DynamicPrefix says RouterConflict, and no prefix
// of the second server's is ever current (before issue 42's rogue-server
// fix, the built-in client took the most preferred offer, as RFC 8415 asks,
// and the pool followed the rogue). With dhcpv6pd.trustedServers naming the
// router's DUID, the client listens to the router's server alone and the
// pool follows its delegation, whatever the other offers.
func TestDHCPv6PDFollowsThePinnedServer(t *testing.T) {
	w := newWorld(t, 2)
	ctx := t.Context()
	advertise(t, w, prefixA)
	real := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 600 * time.Second, Preferred: 300 * time.Second,
		Name: "home-router"}
	rogue := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:f000::/52"), Length: 56, Valid: 600 * time.Second, Preferred: 300 * time.Second,
		Name: "rogue", Preference: 255}
	if err := w.Net.Router.DelegatePrefixes(ctx, real); err != nil {
		t.Fatal(err)
	}
	r, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.DelegatePrefixes(ctx, rogue); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{"interface": "eth0"}}})
	createPool(t, w)
	for _, n := range []string{"node1", "node2"} {
		startAgent(t, w, n)
	}
	startWriter(t, w, "writer-a")
	delegatedFrom := func(what string, pool netip.Prefix) {
		t.Helper()
		eventuallyWithin(t, 2*time.Minute, what, func() (bool, string) {
			st := dpStatus(t, w, "home")
			p, err := netip.ParsePrefix(st.CurrentPrefix)
			if err != nil || !pool.Contains(p.Addr()) || p.Bits() != 56 {
				return false, st.CurrentPrefix
			}
			b := blocks(t, w, "lb")
			return slices.Contains(b, p.String()), fmt.Sprint(b)
		})
	}
	eventuallyWithin(t, 2*time.Minute, "RouterConflict, and nothing current", func() (bool, string) {
		st := dpStatus(t, w, "home")
		if st.CurrentPrefix != "" {
			t.Fatalf("current %s while two servers disagree", st.CurrentPrefix)
		}
		c := condition(st, render.RouterConflict)
		return c == "True RouterConflict", c
	})
	var metric []float64
	for _, n := range []string{"node1", "node2"} {
		metric = append(metric, agentMetric(t, w, n, `renumber_agent_dhcpv6_conflict{link="eth0"}`))
	}
	if !slices.Contains(metric, 1) {
		t.Errorf("renumber_agent_dhcpv6_conflict on node1, node2 = %v, want 1 on one", metric)
	}

	patch := fmt.Sprintf(`{"spec":{"acquisition":{"dhcpv6pd":{"trustedServers":[%q]}}}}`, real.ServerDUID())
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	delegatedFrom("pinned: the router's delegation", real.Pool)
	settleWrites()
	if st := dpStatus(t, w, "home"); !real.Pool.Contains(netip.MustParsePrefix(st.CurrentPrefix).Addr()) {
		t.Errorf("current %s after pinning, want inside %s", st.CurrentPrefix, real.Pool)
	}
}
