package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestDHCPv6PDALiarConfirmerNeverTakesTheClient: the confirmer's node is
// taken (its agent replaced by whoever holds its token; the Node stays
// Ready). It offers a forged /56 past --dhcpv6-confirm-within: it is
// replaced by the third node, and the client role stays with the node that
// requests and renews the binding - one node's offer never hands it the
// client (it did: then, as client, it claimed the current prefix and never
// renewed, while the status said Confirmed and dhcpd's lease ran out). A host
// on the link (an unarmed copier) counts the client messages that keep the
// binding.
func TestDHCPv6PDALiarConfirmerNeverTakesTheClient(t *testing.T) {
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 60 * time.Second, Preferred: 30 * time.Second}
	w, agents, _ := pdClientWorld(t, 3, first, "--node-not-ready-grace", "10s", "--dhcpv6-confirm-within", "30s")
	ctx := t.Context()
	speaker := rogueSpeaker(t, w)
	ear := &copier{s: speaker, answered: map[dhcpv6.MessageType]int{}} // never armed: it listens
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go ear.run(cctx)
	p1, client, confirmer := delegationConfirmed(t, w)
	t.Logf("%s: client %s, confirmer %s", p1, client, confirmer)

	liar := confirmer
	if err := agents[liar].Kill(); err != nil {
		t.Fatal(err)
	}
	write := func(d string) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, digest.Annotation, d)
		if _, err := w.API.Client.CoreV1().Nodes().Patch(ctx, liar, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	write("v1;eth0=2001:db8:bad::/56 p offer")
	forged := time.Now()
	eventuallyWithin(t, 2*time.Minute, "the liar replaced as confirmer", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.DHCPv6PD != nil && st.DHCPv6PD.ConfirmerNode != liar && st.DHCPv6PD.ConfirmerNode != "", fmt.Sprintf("%+v", st.DHCPv6PD)
	})
	// Two valid lifetimes after the forgery: the honest client renewed.
	time.Sleep(time.Until(forged.Add(2 * first.Valid)))
	st := dpStatus(t, w, "home")
	c := meta.FindStatusCondition(st.Conditions, "DelegationConfirmed")
	kept := 0
	ear.mu.Lock()
	for _, h := range ear.heard {
		if h.at.After(forged) && slices.Contains([]dhcpv6.MessageType{dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind}, h.msg.MessageType) {
			kept++
		}
	}
	ear.mu.Unlock()
	t.Logf("%v after the forgery: current %s, dhcpv6pd %+v, DelegationConfirmed %s/%s %q; Request/Renew/Rebind heard since: %d",
		time.Since(forged).Round(time.Second), st.CurrentPrefix, st.DHCPv6PD, c.Status, c.Reason, c.Message, kept)
	if st.DHCPv6PD == nil || st.DHCPv6PD.ClientNode != client {
		t.Errorf("the client is %+v, want %s kept (the liar %s only offered a forged prefix)", st.DHCPv6PD, client, liar)
	}
	if kept == 0 {
		t.Errorf("no Request, Renew or Rebind heard in %v (valid %v): nobody keeps the binding", time.Since(forged).Round(time.Second), first.Valid)
	}
	if st.CurrentPrefix != p1.String() {
		t.Errorf("current %s, want %s", st.CurrentPrefix, p1)
	}
}
