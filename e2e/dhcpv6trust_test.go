package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// solicitContradictor answers, under the server's DUID, every Solicit that
// does not come from the client's node with an offer of its own prefix: each
// confirmer's probe then hears two answers under one DUID that disagree, and
// takes neither. The client's own messages it leaves alone.
type solicitContradictor struct {
	s      *world.DHCPv6Speaker
	server dhcpv6.DUID
	own    netip.Prefix

	mu       sync.Mutex
	client   string // the client's node's address, from its first Renew
	answered int
}

func (c *solicitContradictor) run(ctx context.Context) {
	hearClients(ctx, c.s, func(m *dhcpv6.Message, from net.Addr) {
		src := from.(*net.UDPAddr).IP.String()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.client == "" && m.MessageType == dhcpv6.MessageTypeRenew {
			c.client = src
		}
		if m.MessageType != dhcpv6.MessageTypeSolicit || c.client == "" || src == c.client {
			return
		}
		a := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeAdvertise, TransactionID: m.TransactionID}
		a.AddOption(dhcpv6.OptClientID(m.Options.ClientID()))
		a.AddOption(dhcpv6.OptServerID(c.server))
		ia := &dhcpv6.OptIAPD{IaId: m.Options.OneIAPD().IaId, T1: 30 * time.Second, T2: 48 * time.Second}
		ia.Options.Add(&dhcpv6.OptIAPrefix{PreferredLifetime: time.Hour, ValidLifetime: 2 * time.Hour,
			Prefix: &net.IPNet{IP: c.own.Addr().AsSlice(), Mask: net.CIDRMask(c.own.Bits(), 128)}})
		a.AddOption(ia)
		if c.s.Answer(a.ToBytes(), from) == nil {
			c.answered++
		}
	})
}

func (c *solicitContradictor) counts() (client string, answered int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.client, c.answered
}

// TestDHCPv6PDASolicitContradictorIsBoundedByTrustClientAfter: three nodes,
// ISC dhcpd (its DUID pinned in trustedServers), a host on the link that
// answers every confirmer's Solicit under dhcpd's DUID with a prefix of its
// own, leaving the client's messages alone. dhcpd renumbers (another pool;
// the client's next Renew is told NoBinding, it solicits and requests): the
// client holds the new delegation, and no confirmer is ever offered it.
// By default nothing moves: for 90 s the old prefix stays current and
// DelegationConfirmed is False. Then the admin sets
// spec.acquisition.dhcpv6pd.trustClientAfter to 1m: the writer waits at
// least three --dhcpv6-confirm-within (30 s here), and 90 s later the
// client's delegation is current (DelegationConfirmed False ClientTrusted,
// a Warning event ClientTrusted), and the contradictor's prefix never is.
func TestDHCPv6PDASolicitContradictorIsBoundedByTrustClientAfter(t *testing.T) {
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 60 * time.Second, Preferred: 30 * time.Second, Name: "isp"}
	w := newWorld(t, 3)
	ctx := t.Context()
	speaker := rogueSpeaker(t, w)
	bad := netip.MustParsePrefix("2001:db8:bad::/56")
	c := &solicitContradictor{s: speaker, server: serverDUIDOf(t, first), own: bad}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go c.run(cctx)
	advertise(t, w, prefixA)
	if err := w.Net.Router.DelegatePrefixes(ctx, first); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{
		"interface": "eth0", "trustedServers": []any{first.ServerDUID()}}}})
	createPool(t, w)
	for _, n := range []string{"node1", "node2", "node3"} {
		startAgent(t, w, n)
	}
	startWriter(t, w, "writer-a", "--dhcpv6-confirm-within", "30s")
	p1, client, _ := delegationConfirmed(t, w)
	eventuallyWithin(t, time.Minute, "the client's Renew heard", func() (bool, string) {
		addr, _ := c.counts()
		return addr != "", addr
	})
	t.Logf("%s current, client %s", p1, client)

	second := first
	second.Pool = netip.MustParsePrefix("2001:db8:b00::/52")
	if err := w.Net.Router.DelegatePrefixes(ctx, second); err != nil {
		t.Fatal(err)
	}
	eventuallyWithin(t, 2*time.Minute, "the client's digest carries dhcpd's new delegation", func() (bool, string) {
		v, _ := annotation(t, w, client)
		return strings.Contains(v, "2001:db8:b"), v
	})
	noBad := func() {
		t.Helper()
		if cur, err := netip.ParsePrefix(dpStatus(t, w, "home").CurrentPrefix); err == nil && bad.Overlaps(cur) {
			t.Fatalf("current %s: the contradictor's", cur)
		}
	}
	held := time.Now()
	for time.Since(held) < 90*time.Second {
		noBad()
		if st := dpStatus(t, w, "home"); st.CurrentPrefix != p1.String() {
			t.Fatalf("%v into the stall, by default: current %s, want %s kept (dhcpv6pd %+v)", time.Since(held).Round(time.Second), st.CurrentPrefix, p1, st.DHCPv6PD)
		}
		time.Sleep(time.Second)
	}
	st := dpStatus(t, w, "home")
	_, answered := c.counts()
	t.Logf("90 s into the stall: current %s, %s, dhcpv6pd %+v; the contradictor answered %d Solicits", st.CurrentPrefix, condition(st, render.DelegationConfirmed), st.DHCPv6PD, answered)
	if got := condition(st, render.DelegationConfirmed); !strings.HasPrefix(got, "False") {
		t.Errorf("DelegationConfirmed %q during the stall, want False", got)
	}

	u := get(t, w, api.GVR, "home")
	if err := unstructured.SetNestedField(u.Object, "1m", "spec", "acquisition", "dhcpv6pd", "trustClientAfter"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.API.Dynamic.Resource(api.GVR).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	set := time.Now()
	var landed time.Time
	eventuallyWithin(t, 3*time.Minute, "the client's delegation current past trustClientAfter", func() (bool, string) {
		noBad()
		st := dpStatus(t, w, "home")
		cur, err := netip.ParsePrefix(st.CurrentPrefix)
		if err != nil || !second.Pool.Contains(cur.Addr()) {
			return false, fmt.Sprintf("current %q, %s, %+v", st.CurrentPrefix, condition(st, render.DelegationConfirmed), st.DHCPv6PD)
		}
		landed = time.Now()
		return true, ""
	})
	// The bound is counted from the writer's first pass after the change:
	// not sooner than max(1m, 3 x 30 s) after it was made (less the second
	// the status's times are truncated to).
	if landed.Sub(set) < 90*time.Second-time.Second {
		t.Errorf("landed %v after trustClientAfter was set, before the 90 s the writer waits", landed.Sub(set))
	}
	st = dpStatus(t, w, "home")
	if got := condition(st, render.DelegationConfirmed); got != "False "+render.ReasonTrusted {
		t.Errorf("DelegationConfirmed %q, want False %s", got, render.ReasonTrusted)
	}
	eventuallyWithin(t, 30*time.Second, "a ClientTrusted Warning", func() (bool, string) {
		evs, err := w.API.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + render.ReasonTrusted})
		if err != nil {
			return false, err.Error()
		}
		return len(evs.Items) == 1 && evs.Items[0].Type == "Warning", fmt.Sprint(len(evs.Items), " events")
	})
	t.Logf("%s current %v after trustClientAfter was set; dhcpv6pd %+v", st.CurrentPrefix, landed.Sub(set).Round(time.Second), st.DHCPv6PD)
}
