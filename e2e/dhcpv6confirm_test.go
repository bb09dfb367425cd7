package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// TestDHCPv6PDOneNodeForgesNoDelegation (issue 42, "one node"): the agents'
// own DHCPv6 client runs on one node, and whoever holds that node's identity
// writes any digest on it. With three nodes against ISC dhcpd in the router,
// the writer names a client and a confirmer, which solicits with the same
// identity and reports the offer. The client's agent is replaced by a forger
// that claims another delegation while its Node stays Ready (so it stays the
// client): the pool never holds the forged prefix, DelegationConfirmed turns
// False with a DelegationDisagrees event, and past --dhcpv6-confirm-within
// the third node confirms and, offered alike, takes the client over. A real renumbering by dhcpd then
// lands, confirmed.
func TestDHCPv6PDOneNodeForgesNoDelegation(t *testing.T) {
	w := newWorld(t, 3)
	ctx := t.Context()
	advertise(t, w, prefixA)
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 60 * time.Second, Preferred: 30 * time.Second}
	if err := w.Net.Router.DelegatePrefixes(ctx, first); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{"interface": "eth0"}}})
	createPool(t, w)
	agents := map[string]interface{ Kill() error }{}
	for _, n := range []string{"node1", "node2", "node3"} {
		agents[n] = startAgent(t, w, n).Process
	}
	startWriter(t, w, "writer-a", "--node-not-ready-grace", "10s", "--dhcpv6-confirm-within", "30s")

	forged := netip.MustParsePrefix("2001:db8:bad::/56")
	noForged := func() {
		t.Helper()
		if b := blocks(t, w, "lb"); slices.Contains(b, forged.String()) {
			t.Fatalf("the pool holds the forged %s: %v", forged, b)
		}
		st := dpStatus(t, w, "home")
		if st.CurrentPrefix == forged.String() || slices.ContainsFunc(st.History, func(h api.HistoryEntry) bool { return h.Prefix == forged.String() }) {
			t.Fatalf("the status names the forged %s: %+v", forged, st)
		}
	}
	// confirmed waits for a delegation from pool to be current and in the
	// pool, confirmed, and returns it with the client and the confirmer.
	confirmed := func(what string, pool netip.Prefix, limit time.Duration) (p netip.Prefix, client, confirmer string) {
		t.Helper()
		eventuallyWithin(t, limit, what, func() (bool, string) {
			noForged()
			st := dpStatus(t, w, "home")
			cur, err := netip.ParsePrefix(st.CurrentPrefix)
			c := meta.FindStatusCondition(st.Conditions, "DelegationConfirmed")
			if err != nil || !pool.Contains(cur.Addr()) || st.DHCPv6PD == nil || c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Confirmed" {
				return false, fmt.Sprintf("%s %+v %+v", st.CurrentPrefix, st.DHCPv6PD, c)
			}
			p, client, confirmer = cur, st.DHCPv6PD.ClientNode, st.DHCPv6PD.ConfirmerNode
			b := blocks(t, w, "lb")
			return slices.Equal(b, []string{"192.0.2.0/24", p.String()}), fmt.Sprint(b)
		})
		return p, client, confirmer
	}
	p1, client, confirmer := confirmed("a delegation, confirmed", first.Pool, 2*time.Minute)
	if client == confirmer || confirmer == "" {
		t.Fatalf("client %q, confirmer %q", client, confirmer)
	}
	waitDigest(t, w, confirmer, "reports the offer", func(n digest.Node) bool {
		return slices.ContainsFunc(n.Links, func(l digest.Link) bool {
			return slices.ContainsFunc(l.Prefixes, func(e digest.Prefix) bool { return e.Prefix == p1 && e.Sources == digest.SourceOffer })
		})
	})

	// The client's agent is replaced by whoever holds its identity; its Node
	// stays Ready, so it stays the client.
	if err := agents[client].Kill(); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, digest.Annotation, "v1;eth0="+forged.String()+" p pd")
	if _, err := w.API.Client.CoreV1().Nodes().Patch(ctx, client, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyWithin(t, time.Minute, "DelegationConfirmed False, status.dhcpv6pd naming the forged delegation", func() (bool, string) {
		noForged()
		st := dpStatus(t, w, "home")
		c := meta.FindStatusCondition(st.Conditions, "DelegationConfirmed")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "DelegationDisagrees" && st.DHCPv6PD != nil && st.DHCPv6PD.Unconfirmed == forged.String(),
			fmt.Sprintf("%+v %+v", c, st.DHCPv6PD)
	})
	waitEvent(t, w, "DelegationDisagrees", "home")
	st := dpStatus(t, w, "home")
	if st.CurrentPrefix != p1.String() {
		t.Errorf("current %s after the client's forgery, want %s kept", st.CurrentPrefix, p1)
	}
	if c := meta.FindStatusCondition(st.Conditions, "PrefixAcquired"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("PrefixAcquired %+v: the server still offers %s to the confirmer", c, p1)
	}

	// Past the bound another node confirms; offered what the confirmer
	// before it was, it takes the client over (and the forger, if next, is
	// rotated out as a silent confirmer): confirmed again.
	eventuallyWithin(t, 3*time.Minute, "another node holds the delegation as the client", func() (bool, string) {
		noForged()
		st := dpStatus(t, w, "home")
		if st.DHCPv6PD == nil || st.DHCPv6PD.ClientNode == client {
			return false, fmt.Sprintf("%+v", st.DHCPv6PD)
		}
		nd, err := w.API.Client.CoreV1().Nodes().Get(ctx, st.DHCPv6PD.ClientNode, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n, err := digest.Decode(nd.Annotations[digest.Annotation])
		return err == nil && slices.ContainsFunc(n.Links, func(l digest.Link) bool {
			return slices.ContainsFunc(l.Prefixes, func(e digest.Prefix) bool { return e.Prefix == p1 && e.Sources&digest.SourcePD != 0 })
		}), fmt.Sprintf("%+v %v", st.DHCPv6PD, n)
	})
	p, now, _ := confirmed("the roles rotated, confirmed again", first.Pool, 3*time.Minute)
	if p != p1 || now == client {
		t.Errorf("after the rotation: %s on %s, want %s off the forger %s", p, now, p1, client)
	}

	// A real renumbering lands, confirmed.
	second := first
	second.Pool = netip.MustParsePrefix("2001:db8:b00::/52")
	if err := w.Net.Router.DelegatePrefixes(ctx, second); err != nil {
		t.Fatal(err)
	}
	p2, _, _ := confirmed("the ISP's renumbering, confirmed", second.Pool, 3*time.Minute)
	t.Logf("delegations: %s, then %s; the forged %s never current", p1, p2, forged)
	noForged()
}
