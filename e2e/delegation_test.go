package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
)

// TestASubnetOfTheDelegationFollowsAndIsAdvertised: the ISP delegates a /56,
// the router advertises one /64 of it (prefix A's, then B's). With
// delegatedPrefixLength 56, a pool on the subnet "third" - the /64 number 3
// of the /56, which no RA ever carries - holds it, and a
// CiliumBGPAdvertisement announces the pool; through a renumbering of the
// /56 the pool moves to number 3 of the new /56 (the old one draining) with
// one write to the pool and one to the status, and the advertisement is not
// rewritten. The writer's admission policy lets it write there because the
// status names the delegation. A subnet beyond the delegation is a
// condition, never a write.
func TestASubnetOfTheDelegationFollowsAndIsAdvertised(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA) // 2001:db8:1:100::/64, in 2001:db8:1:100::/56
	third := func(advertise bool, offset int) map[string]any {
		return map[string]any{"name": "third", "offset": offset, "prefixLength": 64,
			"bgp": map[string]any{"advertise": advertise, "community": "65000:3"}}
	}
	createDP(t, w, "home", map[string]any{
		"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0", "delegatedPrefixLength": 56}},
		"subnets":     []any{third(true, 3)},
	})
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "third", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "third"}},
		"spec": map[string]any{
			"blocks":          []any{map[string]any{"cidr": "192.0.2.0/24"}},
			"serviceSelector": map[string]any{"matchLabels": map[string]any{"expose": "internet"}},
		},
	})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	advertised := func() string {
		u, err := w.API.Dynamic.Resource(advertGVR).Get(ctx, "home-third", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(u.Object["spec"])
	}
	follows := func(want []string, delegation string) {
		t.Helper()
		eventually(t, "the pool holds "+strings.Join(want, ", "), func() (bool, string) {
			st := dpStatus(t, w, "home")
			got := blocks(t, w, "third")
			var subnets []string
			for _, s := range st.Subnets {
				subnets = append(subnets, s.Name+"="+s.CIDR+" "+s.BGPAdvertisement)
			}
			ok := slices.Equal(got, append([]string{"192.0.2.0/24"}, want...)) && st.DelegatedPrefix == delegation &&
				slices.Equal(subnets, []string{"third=" + want[0] + " home-third"})
			return ok, fmt.Sprintf("pool %v, status delegation %q subnets %v", got, st.DelegatedPrefix, subnets)
		})
	}
	follows([]string{"2001:db8:1:103::/64"}, "2001:db8:1:100::/56")
	ad := advertised()
	if !strings.Contains(ad, "expose:internet") || !strings.Contains(ad, "65000:3") {
		t.Fatalf("the advertisement does not announce the pool: %s", ad)
	}
	settleWrites()

	m := mark(t, w)
	advertise(t, w, prefixB, prefixA) // 2001:db8:2:200::/64, in 2001:db8:2:200::/56
	follows([]string{"2001:db8:2:203::/64", "2001:db8:1:103::/64"}, "2001:db8:2:200::/56")
	settleWrites()
	want := []string{"patch ciliumloadbalancerippools third 200", "patch dynamicprefixes/status home 200"}
	if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
		t.Errorf("renumbering the /56 wrote %q, want %q", got, want)
	}
	if got := advertised(); got != ad {
		t.Errorf("the advertisement changed: %s, was %s", got, ad)
	}
	var history []string
	for _, h := range dpStatus(t, w, "home").History {
		history = append(history, h.Prefix+" in "+h.DelegatedPrefix+" "+h.State)
	}
	if want := []string{"2001:db8:2:200::/64 in 2001:db8:2:200::/56 active", "2001:db8:1:100::/64 in 2001:db8:1:100::/56 draining"}; !slices.Equal(history, want) {
		t.Errorf("history %q, want %q", history, want)
	}

	// The 257th /64 of a /56 is outside it: the status says so, nothing is written.
	m = mark(t, w)
	patch := fmt.Appendf(nil, `{"spec":{"subnets":[{"name":"third","offset":256,"prefixLength":64,"bgp":{"advertise":true,"community":"65000:3"}}]}}`)
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a subnet beyond the delegation is a condition", func() (bool, string) {
		st := dpStatus(t, w, "home")
		msg := ""
		for _, c := range st.Conditions {
			if c.Type == "Degraded" {
				msg = c.Message
			}
		}
		return condition(st, "Degraded") == "True InvalidSpec" && strings.Contains(msg, "offset 256"), condition(st, "Degraded") + ": " + msg
	})
	settleWrites()
	for _, wr := range objectWrites(writesBy(t, w, m, writerUser)) {
		if !strings.HasPrefix(wr, "patch dynamicprefixes/status ") {
			t.Errorf("a spec with a subnet beyond the delegation wrote %s", wr)
		}
	}
	if got := blocks(t, w, "third"); !slices.Equal(got, []string{"192.0.2.0/24", "2001:db8:2:203::/64", "2001:db8:1:103::/64"}) {
		t.Errorf("the pool changed: %v", got)
	}
}
