package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// TestDHCPv6PDALiarClientOfThreeIsNotTrustedUnderAShortBound:
// three nodes, no LAN accomplice - the two honest nodes are offered dhcpd's
// real binding. trustClientAfter is 1m, the spec's floor, under the
// default --dhcpv6-confirm-within (2m). The client's Node is taken and
// claims a forged /56 held. The rotation replaces it as client (two honest
// nodes offered alike); its forgery must never be current before that.
func TestDHCPv6PDALiarClientOfThreeIsNotTrustedUnderAShortBound(t *testing.T) {
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 600 * time.Second, Preferred: 300 * time.Second}
	w, agents, _ := pdClientWorld(t, 3, first)
	ctx := t.Context()
	p1, client, _ := delegationConfirmed(t, w)
	u := get(t, w, api.GVR, "home")
	if err := unstructured.SetNestedField(u.Object, "1m", "spec", "acquisition", "dhcpv6pd", "trustClientAfter"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.API.Dynamic.Resource(api.GVR).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	liar := client
	if err := agents[liar].Kill(); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, digest.Annotation, "v1;eth0=2001:db8:bad::/56 p pd")
	if _, err := w.API.Client.CoreV1().Nodes().Patch(ctx, liar, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	forged := time.Now()
	var badAt time.Time
	var replacedAt time.Time
	for time.Since(forged) < 4*time.Minute {
		st := dpStatus(t, w, "home")
		if st.CurrentPrefix == "2001:db8:bad::/56" && badAt.IsZero() {
			badAt = time.Now()
			t.Logf("%v after the forgery: the forgery is current, dhcpv6pd %+v", badAt.Sub(forged).Round(time.Second), st.DHCPv6PD)
		}
		if st.DHCPv6PD != nil && st.DHCPv6PD.ClientNode != liar && st.DHCPv6PD.ClientNode != "" && replacedAt.IsZero() {
			replacedAt = time.Now()
			t.Logf("%v after the forgery: the liar replaced as client by %s (current %s)", replacedAt.Sub(forged).Round(time.Second), st.DHCPv6PD.ClientNode, st.CurrentPrefix)
		}
		if !replacedAt.IsZero() && st.CurrentPrefix == p1.String() && time.Since(replacedAt) > 30*time.Second {
			break
		}
		time.Sleep(time.Second)
	}
	st := dpStatus(t, w, "home")
	t.Logf("%v after the forgery: current %s, dhcpv6pd %+v", time.Since(forged).Round(time.Second), st.CurrentPrefix, st.DHCPv6PD)
	if !badAt.IsZero() {
		t.Errorf("the liar client's forgery was current %v after it was written (trustClientAfter 1m, confirm-within 2m; replaced as client at %v): three nodes, no accomplice",
			badAt.Sub(forged).Round(time.Second), replacedAt.Sub(forged).Round(time.Second))
	}
}
