package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// The DHCPv6 LAN adversary in the world (issue 42): a host that answers every
// Solicit under more DUIDs than the client's tally keeps, and one that
// speaks to ISC dhcpd in the client's name.

// crowd answers every Solicit it hears, at once, with maxServers refusals
// (NoPrefixAvail) under fresh DUIDs and then an offer of its own prefix,
// Preference 255, under one more; it delegates that prefix to a Request
// naming that DUID.
type crowd struct {
	s   *world.DHCPv6Speaker
	own netip.Prefix

	mu        sync.Mutex
	armed     bool
	solicits  int
	requested int
}

var crowdsOwn = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0x88, 0x88}}

func (c *crowd) run(ctx context.Context) {
	hearClients(ctx, c.s, func(m *dhcpv6.Message, from net.Addr) {
		c.mu.Lock()
		armed := c.armed
		c.mu.Unlock()
		if !armed {
			return
		}
		switch m.MessageType {
		case dhcpv6.MessageTypeSolicit:
			for i := range 16 {
				duid := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0x77, byte(i), 1}}
				c.s.Answer(c.answer(m, duid, false).ToBytes(), from)
			}
			c.s.Answer(c.answer(m, crowdsOwn, true).ToBytes(), from)
			c.mu.Lock()
			c.solicits++
			c.mu.Unlock()
		case dhcpv6.MessageTypeRequest:
			if sid := m.Options.ServerID(); sid != nil && sid.Equal(crowdsOwn) {
				c.s.Answer(c.answer(m, crowdsOwn, true).ToBytes(), from)
				c.mu.Lock()
				c.requested++
				c.mu.Unlock()
			}
		}
	})
}

func (c *crowd) answer(m *dhcpv6.Message, duid dhcpv6.DUID, offer bool) *dhcpv6.Message {
	a := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: m.TransactionID}
	if m.MessageType == dhcpv6.MessageTypeSolicit {
		a.MessageType = dhcpv6.MessageTypeAdvertise
		a.AddOption(dhcpv6.OptPreference(255))
	}
	a.AddOption(dhcpv6.OptClientID(m.Options.ClientID()))
	a.AddOption(dhcpv6.OptServerID(duid))
	ia := &dhcpv6.OptIAPD{IaId: m.Options.OneIAPD().IaId, T1: 30 * time.Minute, T2: 48 * time.Minute}
	if offer {
		ia.Options.Add(&dhcpv6.OptIAPrefix{PreferredLifetime: time.Hour, ValidLifetime: 2 * time.Hour,
			Prefix: &net.IPNet{IP: c.own.Addr().AsSlice(), Mask: net.CIDRMask(c.own.Bits(), 128)}})
	} else {
		ia.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoPrefixAvail})
	}
	a.AddOption(ia)
	return a
}

func (c *crowd) arm(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = on
}

func (c *crowd) counts() (solicits, requested int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.solicits, c.requested
}

// noDigestCarries fails t when a node's digest, or the DynamicPrefix's
// current prefix, is in bad.
func noDigestCarries(t *testing.T, w *world.World, nodes []string, bad netip.Prefix) {
	t.Helper()
	for _, n := range nodes {
		if v, _ := annotation(t, w, n); strings.Contains(v, strings.TrimSuffix(bad.Addr().String(), "::")) {
			t.Fatalf("%s's digest carries the forger's %s: %s", n, bad, v)
		}
	}
	if cur, err := netip.ParsePrefix(dpStatus(t, w, "home").CurrentPrefix); err == nil && bad.Overlaps(cur) {
		t.Fatalf("current %s: the forger's", cur)
	}
}

// TestDHCPv6PDACrowdOfServersDoesNotWin: no trustedServers, ISC dhcpd
// delegating, and from before the agents start a host on the link answers
// every Solicit first under 17 DUIDs: 16 refusals, then an offer of its own
// /56 with Preference 255 (it fills the client's tally of 16 servers before
// dhcpd's Advertise). The client and the confirmer take nothing from it: no
// digest carries its prefix, and the agents report the conflict
// (renumber_agent_dhcpv6_conflict 1). Once it stops, dhcpd's delegation
// lands.
func TestDHCPv6PDACrowdOfServersDoesNotWin(t *testing.T) {
	w := newWorld(t, 2)
	ctx := t.Context()
	advertise(t, w, prefixA)
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 120 * time.Second, Preferred: 60 * time.Second}
	if err := w.Net.Router.DelegatePrefixes(ctx, first); err != nil {
		t.Fatal(err)
	}
	bad := netip.MustParsePrefix("2001:db8:bad::/56")
	cr := &crowd{s: rogueSpeaker(t, w), own: bad, armed: true}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go cr.run(cctx)

	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{"interface": "eth0"}}})
	createPool(t, w)
	nodes := []string{"node1", "node2"}
	for _, n := range nodes {
		startAgent(t, w, n, "--conflict-hold", "15s")
	}
	startWriter(t, w, "writer-a")
	start := time.Now()
	reported := map[string]bool{}
	for {
		noDigestCarries(t, w, nodes, bad)
		for _, n := range nodes {
			if agentMetric(t, w, n, `renumber_agent_dhcpv6_conflict{link="eth0"}`) == 1 {
				reported[n] = true
			}
		}
		solicits, _ := cr.counts()
		if time.Since(start) > 40*time.Second && solicits >= 3 && len(reported) > 0 {
			break
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("after 3 minutes: the crowd answered %d Solicits; renumber_agent_dhcpv6_conflict 1 on %v", solicits, reported)
		}
		time.Sleep(200 * time.Millisecond)
	}
	solicits, requested := cr.counts()
	st := dpStatus(t, w, "home")
	t.Logf("%s after the agents started: the crowd answered %d Solicits (17 DUIDs each), was asked %d Requests; conflict reported by %v; current %q, %s",
		time.Since(start).Round(time.Second), solicits, requested, reported, st.CurrentPrefix, condition(st, render.RouterConflict))

	cr.arm(false)
	stopped := time.Now()
	eventuallyWithin(t, 4*time.Minute, "dhcpd's delegation current once the crowd stops", func() (bool, string) {
		noDigestCarries(t, w, nodes, bad)
		st := dpStatus(t, w, "home")
		cur, err := netip.ParsePrefix(st.CurrentPrefix)
		return err == nil && first.Pool.Contains(cur.Addr()), fmt.Sprintf("%q %+v", st.CurrentPrefix, st.DHCPv6PD)
	})
	t.Logf("dhcpd's delegation current %s after the crowd stopped", time.Since(stopped).Round(time.Second))
}

// TestDHCPv6PDAForgedReleaseIsReported: no trustedServers, ISC dhcpd
// delegating. Once its delegation is current and confirmed, a host on the
// link that heard the client's Renew sends dhcpd a Release of the delegation
// in the client's name (its DUID, IA_PD and dhcpd's DUID, copied from the
// Renew), to the servers' multicast address as a client does. The client's
// node hears it: renumber_agent_dhcpv6_impersonations_total counts it on
// that node and the DynamicPrefix says RouterConflict. The forger sends the
// agents nothing, and whatever dhcpd then does (it frees the lease; the
// client's next Renew is told NoBinding and solicits anew) the current
// prefix stays in dhcpd's pool. (Before, nothing was reported: a forged
// Release was an unseen renumbering.)
func TestDHCPv6PDAForgedReleaseIsReported(t *testing.T) {
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 60 * time.Second, Preferred: 30 * time.Second}
	w, _, _ := pdClientWorld(t, 2, first)
	forgedReleaseIsReported(t, w, first)
}

// forgedReleaseIsReported is TestDHCPv6PDAForgedReleaseIsReported in w,
// a pdClientWorld delegating from first.
func forgedReleaseIsReported(t *testing.T, w *world.World, first world.Delegation) {
	t.Helper()
	speaker := rogueSpeaker(t, w)
	p1, client, confirmer := delegationConfirmed(t, w)
	t.Logf("%s: client %s, confirmer %s", p1, client, confirmer)

	renew := renewHeard(t, speaker)
	release := forgedRelease(t, renew)
	before := agentMetric(t, w, client, `renumber_agent_dhcpv6_impersonations_total{link="eth0"}`)
	if err := speaker.SpeakToServers(release.ToBytes()); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	var status string
	eventuallyWithin(t, time.Minute, "the forged Release counted on the client's node and RouterConflict True", func() (bool, string) {
		got := agentMetric(t, w, client, `renumber_agent_dhcpv6_impersonations_total{link="eth0"}`)
		status = condition(dpStatus(t, w, "home"), render.RouterConflict)
		return got == before+1 && status == "True RouterConflict", fmt.Sprintf("impersonations %v (before %v), %s", got, before, status)
	})
	t.Logf("reported %s after the Release", time.Since(sent).Round(time.Millisecond))
	if got := agentMetric(t, w, confirmer, `renumber_agent_dhcpv6_impersonations_total{link="eth0"}`); got != 0 {
		t.Errorf("the confirmer counted %v impersonations: only the client's node listens", got)
	}
	// Whatever dhcpd does with the Release, the current prefix is one it
	// delegated, for two of its lease's renewals.
	for time.Since(sent) < 70*time.Second {
		st := dpStatus(t, w, "home")
		if cur, err := netip.ParsePrefix(st.CurrentPrefix); err != nil || !first.Pool.Contains(cur.Addr()) {
			t.Fatalf("%v after the Release: current %q, not dhcpd's", time.Since(sent).Round(time.Second), st.CurrentPrefix)
		}
		time.Sleep(500 * time.Millisecond)
	}
	st := dpStatus(t, w, "home")
	t.Logf("70 s after the Release: current %s (was %s), dhcpv6pd %+v, %s", st.CurrentPrefix, p1, st.DHCPv6PD, condition(st, render.RouterConflict))
}

// renewHeard is the first Renew speaker hears on the link (the client's).
func renewHeard(t *testing.T, speaker *world.DHCPv6Speaker) *dhcpv6.Message {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		b, _, err := speaker.Read(time.Now().Add(time.Second))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m, err := dhcpv6.MessageFromBytes(b); err == nil && m.MessageType == dhcpv6.MessageTypeRenew {
			return m
		}
	}
	t.Fatal("no Renew heard in 2 minutes")
	return nil
}

// forgedRelease is a Release of what renew renews, in its client's name
// (its DUID, IA_PD and server's DUID copied).
func forgedRelease(t *testing.T, renew *dhcpv6.Message) *dhcpv6.Message {
	t.Helper()
	release, err := dhcpv6.NewMessage()
	if err != nil {
		t.Fatal(err)
	}
	release.MessageType = dhcpv6.MessageTypeRelease
	release.AddOption(dhcpv6.OptClientID(renew.Options.ClientID()))
	release.AddOption(dhcpv6.OptServerID(renew.Options.ServerID()))
	release.AddOption(dhcpv6.OptElapsedTime(0))
	release.AddOption(renew.Options.OneIAPD())
	return release
}
