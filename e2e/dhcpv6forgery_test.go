package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// The red team's forged Releases (issue 42, second pass), each one ISC
// dhcpd 4.4.3 acts on, each followed at once by a Request under a DUID of
// the forger's own for the freed prefix (dhcpd commits a Request with no
// Solicit first): the forger renumbers the cluster when it likes, which
// only DHCPv6-Shield or SAVI on the switch stops. What the agents owe is
// to report it: before, each variant renumbered the cluster with nothing
// counted and RouterConflict never True.

// TestDHCPv6PDAReleaseUnderTheRenewsTransactionIDIsReported: the Release
// carries the client's own Renew's transaction ID. The client's node hears
// it and knows its own Renew by content, not by transaction ID.
func TestDHCPv6PDAReleaseUnderTheRenewsTransactionIDIsReported(t *testing.T) {
	forgedReleaseReported(t, "impersonations", func(renew *dhcpv6.Message, w *world.World) []byte {
		m := forgedRelease(t, renew)
		m.TransactionID = renew.TransactionID
		return m.ToBytes()
	}, toTheGroup)
}

// TestDHCPv6PDAReleaseInARelayForwardIsReported: the Release wrapped in a
// Relay-Forward to ff02::1:2 (any host may play a relay); the client's
// node unwraps it.
func TestDHCPv6PDAReleaseInARelayForwardIsReported(t *testing.T) {
	forgedReleaseReported(t, "impersonations", relayedRelease(t), toTheGroup)
}

// TestDHCPv6PDAReleaseWithAMalformedOptionIsReported: one malformed option
// appended (a one-byte Elapsed Time) makes the Release garbage to
// insomniacslk/dhcp; the client's node reads it as dhcpd does.
func TestDHCPv6PDAReleaseWithAMalformedOptionIsReported(t *testing.T) {
	forgedReleaseReported(t, "impersonations", func(renew *dhcpv6.Message, w *world.World) []byte {
		return append(forgedRelease(t, renew).ToBytes(), 0, byte(dhcpv6.OptionElapsedTime), 0, 1, 0)
	}, toTheGroup)
}

// TestDHCPv6PDAReleaseCutIntoFragmentsIsReported: 2,000 bytes of an
// unknown option before the Client ID make the Release longer than the
// link's MTU, so the forger's kernel cuts it into fragments, the Client ID
// in the second; dhcpd's kernel reassembles it and dhcpd acts on it. The
// client's node reads the first fragment only: a Release whose client it
// does not show is reported. (The UDP listener before read 1,500 bytes of
// a datagram, which hid the Client ID as well.)
func TestDHCPv6PDAReleaseCutIntoFragmentsIsReported(t *testing.T) {
	forgedReleaseReported(t, "impersonations", func(renew *dhcpv6.Message, w *world.World) []byte {
		b := forgedRelease(t, renew).ToBytes()
		padded := append(b[:4:4], 0x7f, 0x7f, 0x07, 0xd0) // option 32639, 2,000 bytes
		padded = append(padded, make([]byte, 2000)...)
		return append(padded, b[4:]...)
	}, toTheGroup)
}

// TestDHCPv6PDAReleaseToAllServersIsReported: the Release sent to
// All_DHCP_Servers (ff05::1:3), the group relays send to: ISC dhcpd joins
// it and acts on a client message there as on one to ff02::1:2. The
// client's node hears both groups. (Before, it heard ff02::1:2 only, and
// this Release went unreported until its result.)
func TestDHCPv6PDAReleaseToAllServersIsReported(t *testing.T) {
	forgedReleaseReported(t, "impersonations", func(renew *dhcpv6.Message, w *world.World) []byte {
		return forgedRelease(t, renew).ToBytes()
	}, toAllServers)
}

// TestDHCPv6PDAReleaseBehindAHopByHopHeaderIsReported: a hop-by-hop
// extension header between the IPv6 header and UDP; dhcpd's kernel walks
// it and dhcpd acts on the Release. The client's node, which reads the link
// below UDP, walks it too.
func TestDHCPv6PDAReleaseBehindAHopByHopHeaderIsReported(t *testing.T) {
	forgedReleaseReported(t, "impersonations", func(renew *dhcpv6.Message, w *world.World) []byte {
		return forgedRelease(t, renew).ToBytes()
	}, behindHopByHop)
}

// TestDHCPv6PDAUnicastReleaseIsReportedByItsResult: the Relay-Forward sent
// unicast to the router's link-local address, which no listener on
// ff02::1:2 hears. Its result is heard: the client's next Renew is told
// NoBinding for a delegation with valid lifetime left, which it never
// released - counted in renumber_agent_dhcpv6_bindings_dropped_total and
// reported as a conflict, while the client follows dhcpd.
func TestDHCPv6PDAUnicastReleaseIsReportedByItsResult(t *testing.T) {
	forgedReleaseReported(t, "bindings_dropped", relayedRelease(t), toTheRouter)
}

func relayedRelease(t *testing.T) func(*dhcpv6.Message, *world.World) []byte {
	return func(renew *dhcpv6.Message, w *world.World) []byte {
		link := w.Net.Control.Addr().Next() // an address of the link's subnet
		r, err := dhcpv6.EncapsulateRelay(forgedRelease(t, renew), dhcpv6.MessageTypeRelayForward, link.AsSlice(), net.ParseIP("fe80::bad"))
		if err != nil {
			t.Fatal(err)
		}
		return r.ToBytes()
	}
}

// sentTo is where a forgery is sent.
type sentTo int

const (
	toTheGroup     sentTo = iota // ff02::1:2, as clients send
	toTheRouter                  // unicast to the router's link-local address, as a relay may
	toAllServers                 // ff05::1:3, as relays send (ISC dhcpd joins it)
	behindHopByHop               // ff02::1:2, a hop-by-hop header before UDP
	toAllNodes                   // ff02::1, which every host joins
	inCutFragments               // ff02::1:2, fragments cut inside an extension header
	afterAFlood                  // ff02::1:2, amid 40,000 first fragments there whose rest never comes
)

// forgedReleaseReported sends the forgery forge makes of the client's Renew
// (to), then the Request stealing the
// freed prefix, and asserts dhcpd released it and that the client's node
// counted it in renumber_agent_dhcpv6_<counter>_total with RouterConflict
// True on the DynamicPrefix.
func forgedReleaseReported(t *testing.T, counter string, forge func(renew *dhcpv6.Message, w *world.World) []byte, to sentTo) {
	h := aRenewHeard(t)
	w, speaker, p1, client, renew := h.w, h.speaker, h.p1, h.client, h.renew
	metric := `renumber_agent_dhcpv6_` + counter + `_total{link="eth0"}`
	before := agentMetric(t, w, client, metric)
	releases := countLog(w, "rt-dhcpd.log", "releases prefix")
	time.Sleep(time.Second) // past the client's own exchange
	switch to {
	case toTheRouter:
		ll, err := w.Net.Router.LinkLocal(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := speaker.SpeakToServerAt(forge(renew, w), ll); err != nil {
			t.Fatal(err)
		}
	case toAllServers:
		if err := speaker.SpeakToServerAt(forge(renew, w), netip.MustParseAddr("ff05::1:3")); err != nil {
			t.Fatal(err)
		}
	case toAllNodes:
		if err := speaker.SpeakToServerAt(forge(renew, w), netip.MustParseAddr("ff02::1")); err != nil {
			t.Fatal(err)
		}
	case inCutFragments:
		if err := speaker.SpeakPackets(cutInsideExtensionHeaders(forge(renew, w))...); err != nil {
			t.Fatal(err)
		}
	case afterAFlood:
		flood, start := floodFragments(40000), time.Now()
		if err := speaker.SpeakPackets(flood[:20000]...); err != nil {
			t.Fatal(err)
		}
		if err := speaker.SpeakToServers(forge(renew, w)); err != nil {
			t.Fatal(err)
		}
		if err := speaker.SpeakPackets(flood[20000:]...); err != nil {
			t.Fatal(err)
		}
		t.Logf("flood: %d packets sent in %s, the forgery amid them", len(flood), time.Since(start).Round(time.Millisecond))
	case behindHopByHop:
		if err := speaker.SpeakToServersBehindHopByHop(forge(renew, w)); err != nil {
			t.Fatal(err)
		}
	default:
		if err := speaker.SpeakToServers(forge(renew, w)); err != nil {
			t.Fatal(err)
		}
	}
	steal, err := dhcpv6.NewMessage()
	if err != nil {
		t.Fatal(err)
	}
	steal.MessageType = dhcpv6.MessageTypeRequest
	steal.AddOption(dhcpv6.OptClientID(&dhcpv6.DUIDLL{HWType: 1, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0x5e, 0x1f}}))
	steal.AddOption(dhcpv6.OptServerID(renew.Options.ServerID()))
	steal.AddOption(dhcpv6.OptElapsedTime(0))
	ia := &dhcpv6.OptIAPD{IaId: [4]byte{1, 2, 3, 4}}
	ia.Options.Add(&dhcpv6.OptIAPrefix{Prefix: &net.IPNet{IP: p1.Addr().AsSlice(), Mask: net.CIDRMask(p1.Bits(), 128)}})
	steal.AddOption(ia)
	time.Sleep(50 * time.Millisecond)
	if err := speaker.SpeakToServers(steal.ToBytes()); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	eventuallyWithin(t, 20*time.Second, "dhcpd releasing the prefix on the forgery", func() (bool, string) {
		n := countLog(w, "rt-dhcpd.log", "releases prefix")
		return n > releases, fmt.Sprintf("%d releases logged", n)
	})
	eventuallyWithin(t, 90*time.Second, "the forgery counted on the client's node and RouterConflict True", func() (bool, string) {
		got := agentMetric(t, w, client, metric)
		status := condition(dpStatus(t, w, "home"), render.RouterConflict)
		return got > before && status == "True RouterConflict", fmt.Sprintf("%s %v (before %v), %s", counter, got, before, status)
	})
	st := dpStatus(t, w, "home")
	t.Logf("reported %s after the forgery: current %s (was %s)", time.Since(sent).Round(time.Millisecond), st.CurrentPrefix, p1)
	if to == afterAFlood {
		t.Logf("the client's node's listener dropped %v packets unread", agentMetric(t, w, client, `renumber_agent_dhcpv6_listener_dropped_total{link="eth0"}`))
	}
}

// TestDHCPv6PDALifetimeHintInTheClientsNameIsReported: a Renew in the
// client's name (its DUID, IAID and dhcpd's DUID, copied from the client's
// Renew; a transaction ID of its own) for the prefix the client holds, but
// hinting a valid and preferred lifetime of one second. The agents' client
// hints none, so the client's node reports it at once, before anything
// comes of it: renumber_agent_dhcpv6_impersonations_total counts it and
// RouterConflict turns True. What ISC dhcpd does with the hint is logged,
// not asserted (the Reply PD line it writes for the forged Renew), and so
// is the cluster's prefix a minute on.
func TestDHCPv6PDALifetimeHintInTheClientsNameIsReported(t *testing.T) {
	h := aRenewHeard(t)
	w, speaker, p1, client, confirmer, renew := h.w, h.speaker, h.p1, h.client, h.confirmer, h.renew
	metric := `renumber_agent_dhcpv6_impersonations_total{link="eth0"}`
	before := agentMetric(t, w, client, metric)
	time.Sleep(time.Second) // past the client's own exchange
	dhcpdLog := filepath.Join(w.Dir, "rt-dhcpd.log")
	b, _ := os.ReadFile(dhcpdLog)
	logged := len(b)

	hint, err := dhcpv6.NewMessage()
	if err != nil {
		t.Fatal(err)
	}
	hint.MessageType = dhcpv6.MessageTypeRenew
	hint.AddOption(dhcpv6.OptClientID(renew.Options.ClientID()))
	hint.AddOption(dhcpv6.OptServerID(renew.Options.ServerID()))
	hint.AddOption(dhcpv6.OptElapsedTime(0))
	ia := &dhcpv6.OptIAPD{IaId: renew.Options.OneIAPD().IaId}
	ia.Options.Add(&dhcpv6.OptIAPrefix{PreferredLifetime: time.Second, ValidLifetime: time.Second,
		Prefix: &net.IPNet{IP: p1.Addr().AsSlice(), Mask: net.CIDRMask(p1.Bits(), 128)}})
	hint.AddOption(ia)
	if err := speaker.SpeakToServers(hint.ToBytes()); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	eventuallyWithin(t, time.Minute, "the hinting Renew counted on the client's node and RouterConflict True", func() (bool, string) {
		got := agentMetric(t, w, client, metric)
		status := condition(dpStatus(t, w, "home"), render.RouterConflict)
		return got == before+1 && status == "True RouterConflict", fmt.Sprintf("impersonations %v (before %v), %s", got, before, status)
	})
	t.Logf("reported %s after the forged Renew", time.Since(sent).Round(time.Millisecond))
	if got := agentMetric(t, w, confirmer, metric); got != 0 {
		t.Errorf("the confirmer counted %v impersonations: only the client's node listens", got)
	}
	time.Sleep(time.Minute)
	st := dpStatus(t, w, "home")
	b, _ = os.ReadFile(dhcpdLog)
	var answered []string
	for _, l := range strings.Split(string(b[min(logged, len(b)):]), "\n") {
		if strings.Contains(l, "Reply PD") && len(answered) < 3 {
			answered = append(answered, l)
		}
	}
	t.Logf("dhcpd's first Replies since the forgery: %q; a minute on: current %s (was %s), bindings dropped on %s: %v",
		answered, st.CurrentPrefix, p1, client, agentMetric(t, w, client, `renumber_agent_dhcpv6_bindings_dropped_total{link="eth0"}`))
}

// heardRenew is a two-node pdClientWorld whose dhcpd delegates /56s of
// 2001:db8:a00::/52 (valid 60 s, preferred 30 s), a host on its link, the
// delegation confirmed and the client's first Renew as that host heard it.
type heardRenew struct {
	w                 *world.World
	speaker           *world.DHCPv6Speaker
	p1                netip.Prefix
	client, confirmer string
	renew             *dhcpv6.Message
}

func aRenewHeard(t *testing.T) heardRenew {
	t.Helper()
	first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 60 * time.Second, Preferred: 30 * time.Second}
	h := heardRenew{}
	h.w, _, _ = pdClientWorld(t, 2, first)
	h.speaker = rogueSpeaker(t, h.w)
	h.p1, h.client, h.confirmer = delegationConfirmed(t, h.w)
	t.Logf("%s: client %s, confirmer %s", h.p1, h.client, h.confirmer)
	h.renew = renewHeard(t, h.speaker)
	return h
}
