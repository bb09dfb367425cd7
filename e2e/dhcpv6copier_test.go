package e2e

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// heardMessage is a client's message a speaker on the link heard, and when.
type heardMessage struct {
	at  time.Time
	msg *dhcpv6.Message
}

// copier is a host on the link that hears every client's multicast DHCPv6
// messages and, once armed, answers them at once as the server whose DUID
// it copies: Renews and Rebinds with the prefix asked for valid for one
// second, Solicits with Preference 255 and its own prefix, Requests with its
// own prefix (issue 42, item 7).
type copier struct {
	s    *world.DHCPv6Speaker
	duid dhcpv6.DUID
	own  netip.Prefix

	mu       sync.Mutex
	armed    bool
	heard    []heardMessage
	answered map[dhcpv6.MessageType]int
}

// hearClients calls heard with each client message carrying an IA_PD that
// s hears, until ctx ends or the socket fails.
func hearClients(ctx context.Context, s *world.DHCPv6Speaker, heard func(m *dhcpv6.Message, from net.Addr)) {
	for ctx.Err() == nil {
		b, from, err := s.Read(time.Now().Add(200 * time.Millisecond))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			return
		}
		if m, err := dhcpv6.MessageFromBytes(b); err == nil && m.Options.OneIAPD() != nil {
			heard(m, from)
		}
	}
}

func (c *copier) run(ctx context.Context) {
	hearClients(ctx, c.s, func(m *dhcpv6.Message, from net.Addr) {
		c.mu.Lock()
		c.heard = append(c.heard, heardMessage{time.Now(), m})
		armed := c.armed
		c.mu.Unlock()
		if !armed {
			return
		}
		if a := c.answer(m); a != nil && c.s.Answer(a.ToBytes(), from) == nil {
			c.mu.Lock()
			c.answered[m.MessageType]++
			c.mu.Unlock()
		}
	})
}

func (c *copier) answer(m *dhcpv6.Message) *dhcpv6.Message {
	a := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: m.TransactionID}
	a.AddOption(dhcpv6.OptClientID(m.Options.ClientID()))
	a.AddOption(dhcpv6.OptServerID(c.duid))
	ia := &dhcpv6.OptIAPD{IaId: m.Options.OneIAPD().IaId}
	p, valid := c.own, 2*time.Hour
	switch m.MessageType {
	case dhcpv6.MessageTypeSolicit:
		a.MessageType = dhcpv6.MessageTypeAdvertise
		a.AddOption(dhcpv6.OptPreference(255))
	case dhcpv6.MessageTypeRequest:
	case dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind:
		asked := m.Options.OneIAPD().Options.Prefixes()
		if len(asked) == 0 {
			return nil
		}
		p, valid = netip.MustParsePrefix(asked[0].Prefix.String()), time.Second
		ia.T1, ia.T2 = time.Second, time.Second
	default:
		return nil
	}
	ia.Options.Add(&dhcpv6.OptIAPrefix{PreferredLifetime: valid, ValidLifetime: valid,
		Prefix: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}})
	a.AddOption(ia)
	return a
}

func (c *copier) arm(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = on
}

// first is when a message of type t was first heard after since (zero: not yet).
func (c *copier) first(t dhcpv6.MessageType, since time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.heard {
		if h.msg.MessageType == t && h.at.After(since) {
			return h.at
		}
	}
	return time.Time{}
}

func (c *copier) count(t dhcpv6.MessageType) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answered[t]
}

// TestDHCPv6PDCopierOfTheServersDUIDMovesNothing: the built-in client pinned
// to ISC dhcpd's DUID. First the ISP renumbers (dhcpd restarts with another
// pool, NoBinding to the next Renew) and the new delegation lands; the test
// logs how long after the client's Renew. Then a host on the link copies
// dhcpd's DUID from the client's own Renews and answers every Renew first
// with the prefix valid for one second, every Solicit with Preference 255
// and 2001:db8:bad::/56, while dhcpd answers throughout: the client keeps
// dhcpd's prefix (it used to bind the forger's within 3 s of a Renew), no
// digest ever carries the forger's, an agent's renumber_agent_dhcpv6_conflict
// (the client's, or the confirmer's: its Solicits are answered by the copier
// too) is 1 and the DynamicPrefix says RouterConflict. Once the copier stops, the
// condition clears.
func TestDHCPv6PDCopierOfTheServersDUIDMovesNothing(t *testing.T) {
	w := newWorld(t, 2)
	ctx := t.Context()
	advertise(t, w, prefixA)
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 600 * time.Second, Preferred: 20 * time.Second,
		Name: "home-router"}
	if err := w.Net.Router.DelegatePrefixes(ctx, first); err != nil {
		t.Fatal(err)
	}
	speaker := rogueSpeaker(t, w)
	serverDUID := serverDUIDOf(t, first)
	bad := netip.MustParsePrefix("2001:db8:bad::/56")
	cp := &copier{s: speaker, duid: serverDUID, own: bad, answered: map[dhcpv6.MessageType]int{}}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go cp.run(cctx)

	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dhcpv6pd": map[string]any{
		"interface": "eth0", "trustedServers": []any{first.ServerDUID()}}}})
	createPool(t, w)
	nodes := []string{"node1", "node2"}
	for _, n := range nodes {
		startAgent(t, w, n, "--conflict-hold", "15s")
	}
	startWriter(t, w, "writer-a")
	following := func(what string, pool netip.Prefix) (netip.Prefix, string) {
		t.Helper()
		var cur netip.Prefix
		var client string
		eventuallyWithin(t, 2*time.Minute, what, func() (bool, string) {
			st := dpStatus(t, w, "home")
			p, err := netip.ParsePrefix(st.CurrentPrefix)
			if err != nil || !pool.Contains(p.Addr()) || st.DHCPv6PD == nil || st.DHCPv6PD.ClientNode == "" {
				return false, st.CurrentPrefix
			}
			cur, client = p, st.DHCPv6PD.ClientNode
			return slices.Contains(blocks(t, w, "lb"), p.String()), fmt.Sprint(blocks(t, w, "lb"))
		})
		return cur, client
	}
	p1, client := following("dhcpd's first delegation", first.Pool)

	// The ISP renumbers: how long after the client's Renew does the new
	// delegation reach the client's digest?
	second := first
	second.Pool = netip.MustParsePrefix("2001:db8:b00::/52")
	renumbered := time.Now()
	if err := w.Net.Router.DelegatePrefixes(ctx, second); err != nil {
		t.Fatal(err)
	}
	var p2 netip.Prefix
	var landed time.Time
	eventuallyWithin(t, 2*time.Minute, "the client's digest carries the new delegation", func() (bool, string) {
		v, _ := annotation(t, w, client)
		n, err := digest.Decode(v)
		if err != nil {
			return false, v
		}
		for _, l := range n.Links {
			for _, e := range l.Prefixes {
				if e.Sources&digest.SourcePD != 0 && second.Pool.Contains(e.Prefix.Addr()) {
					p2, landed = e.Prefix, time.Now()
					return true, v
				}
			}
		}
		return false, v
	})
	renew := cp.first(dhcpv6.MessageTypeRenew, renumbered)
	t.Logf("renumbered %s -> %s: the Renew went %s after dhcpd restarted; the digest carried the new delegation %s after the Renew (Solicit %s, Request %s after it)",
		p1, p2, renew.Sub(renumbered).Round(time.Millisecond), landed.Sub(renew).Round(time.Millisecond),
		cp.first(dhcpv6.MessageTypeSolicit, renew).Sub(renew).Round(time.Millisecond), cp.first(dhcpv6.MessageTypeRequest, renew).Sub(renew).Round(time.Millisecond))
	following("the pool follows the new delegation", second.Pool)

	settleWrites()
	m := mark(t, w)
	cp.arm(true)
	noBad := func() (bool, string) {
		for _, n := range nodes {
			if v, _ := annotation(t, w, n); strings.Contains(v, "2001:db8:bad:") {
				return false, n + ": " + v
			}
		}
		if st := dpStatus(t, w, "home"); st.CurrentPrefix != p2.String() {
			return false, "current " + st.CurrentPrefix
		}
		return true, ""
	}
	// For 40 s at least, and three Renews or Rebinds answered first by the
	// copier (T1: 10 s, then the client's retransmissions), dhcpd's prefix is
	// held throughout and the conflict is reported - in the status, and by
	// the client's agent or the confirmer's (its Solicits are answered by the
	// copier too) in renumber_agent_dhcpv6_conflict, read while the status
	// says so (the agent's report lapses a while after the last
	// contradiction, which under load can come before a later read).
	var metric []float64
	reported := func() bool { return slices.Contains(metric, 1) }
	start := time.Now()
	for {
		if ok, why := noBad(); !ok {
			t.Fatalf("the copier moved the delegation: %s", why)
		}
		c := condition(dpStatus(t, w, "home"), render.RouterConflict)
		if c == "True RouterConflict" && !reported() {
			metric = metric[:0]
			for _, n := range nodes {
				metric = append(metric, agentMetric(t, w, n, `renumber_agent_dhcpv6_conflict{link="eth0"}`))
			}
		}
		if time.Since(start) > 40*time.Second && cp.count(dhcpv6.MessageTypeRenew)+cp.count(dhcpv6.MessageTypeRebind) >= 3 && c == "True RouterConflict" && reported() {
			break
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("after 3 minutes: the copier answered %d Renews and %d Rebinds; RouterConflict %q; renumber_agent_dhcpv6_conflict on %v = %v (want 1 on one, client %s)",
				cp.count(dhcpv6.MessageTypeRenew), cp.count(dhcpv6.MessageTypeRebind), c, nodes, metric, client)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := objectWrites(writesBy(t, w, m, writerUser)); slices.Contains(got, "patch ciliumloadbalancerippools lb 200") {
		t.Errorf("the pool was written while the copier spoke: %q", got)
	}
	t.Logf("the copier answered %d Renews, %d Rebinds, %d Solicits, %d Requests; %s kept", cp.count(dhcpv6.MessageTypeRenew),
		cp.count(dhcpv6.MessageTypeRebind), cp.count(dhcpv6.MessageTypeSolicit), cp.count(dhcpv6.MessageTypeRequest), p2)

	cp.arm(false)
	eventuallyWithin(t, 2*time.Minute, "RouterConflict clears once only dhcpd answers", func() (bool, string) {
		c := condition(dpStatus(t, w, "home"), render.RouterConflict)
		return strings.HasPrefix(c, "False"), c
	})
	if ok, why := noBad(); !ok {
		t.Errorf("after the copier stopped: %s", why)
	}
}

// rogueSpeaker is a host on the world's link that speaks DHCPv6 as it likes
// (closed when the test ends).
func rogueSpeaker(t *testing.T, w *world.World) *world.DHCPv6Speaker {
	t.Helper()
	rogue, err := w.Net.RogueRouter(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	speaker, err := rogue.DHCPv6Speaker()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { speaker.Close() })
	return speaker
}

// serverDUIDOf is the DUID of dhcpd configured with d (d.Name set).
func serverDUIDOf(t *testing.T, d world.Delegation) dhcpv6.DUID {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(d.ServerDUID(), ":", ""))
	if err != nil {
		t.Fatal(err)
	}
	duid, err := dhcpv6.DUIDFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return duid
}
