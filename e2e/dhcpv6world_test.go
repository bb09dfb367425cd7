package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/tools/world"
)

// pdClientWorld is a world whose router (ISC dhcpd) delegates from first, a
// DynamicPrefix home following it with the agents' own client on eth0, a
// pool, an agent on each of nodes (node1, node2, ...) and a writer with
// writerArgs; it returns the agents' processes by node and the writer.
func pdClientWorld(t *testing.T, nodes int, first world.Delegation, writerArgs ...string) (*world.World, map[string]interface{ Kill() error }, *exec.Cmd) {
	t.Helper()
	return pdClientWorldIn(t, newWorld(t, nodes), nodes, first, writerArgs...)
}

// pdClientWorldIn is pdClientWorld in w, a world of nodes.
func pdClientWorldIn(t *testing.T, w *world.World, nodes int, first world.Delegation, writerArgs ...string) (*world.World, map[string]interface{ Kill() error }, *exec.Cmd) {
	t.Helper()
	advertise(t, w, prefixA)
	if err := w.Net.Router.DelegatePrefixes(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{"interface": "eth0"}}})
	createPool(t, w)
	agents := map[string]interface{ Kill() error }{}
	for i := range nodes {
		n := fmt.Sprintf("node%d", i+1)
		agents[n] = startAgent(t, w, n).Process
	}
	return w, agents, startWriter(t, w, "writer-a", writerArgs...)
}

// delegationConfirmed waits for home's delegation to be current, with a
// confirmer that confirms it, and returns it with the client and the
// confirmer.
func delegationConfirmed(t *testing.T, w *world.World) (p netip.Prefix, client, confirmer string) {
	t.Helper()
	eventuallyWithin(t, 2*time.Minute, "a confirmed delegation", func() (bool, string) {
		st := dpStatus(t, w, "home")
		c := meta.FindStatusCondition(st.Conditions, "DelegationConfirmed")
		cur, err := netip.ParsePrefix(st.CurrentPrefix)
		if err != nil || st.DHCPv6PD == nil || c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Confirmed" || st.DHCPv6PD.ConfirmerNode == "" {
			return false, fmt.Sprintf("%s %+v %+v", st.CurrentPrefix, st.DHCPv6PD, c)
		}
		p, client, confirmer = cur, st.DHCPv6PD.ClientNode, st.DHCPv6PD.ConfirmerNode
		return true, ""
	})
	return p, client, confirmer
}
