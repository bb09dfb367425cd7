package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// copyOfRadvd is what radvd sends for advertise (hop limit 64, router
// lifetime 0, each prefix on-link and autonomous), with prefixes of the
// caller's choosing and, after them, any extra options.
func copyOfRadvd(t *testing.T, prefixes []*ndp.PrefixInformation, extra ...ndp.Option) []byte {
	t.Helper()
	ra := &ndp.RouterAdvertisement{CurrentHopLimit: 64}
	for _, p := range prefixes {
		ra.Options = append(ra.Options, p)
	}
	ra.Options = append(ra.Options, extra...)
	b, err := ndp.MarshalMessage(ra)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// impostorSender takes the router's link-local address, trusted, on a host
// of the LAN (World.Impostor) and returns a socket that sends from it, closed
// when the test ends.
func impostorSender(t *testing.T, w *world.World, trusted netip.Addr) *world.RASender {
	t.Helper()
	impostor, ll, err := w.Net.Impostor(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ll != trusted {
		t.Fatalf("the impostor holds %s, the router %s", ll, trusted)
	}
	sender, err := impostor.Sender()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sender.Close() })
	return sender
}

func pioOf(p netip.Prefix, valid, preferred time.Duration) *ndp.PrefixInformation {
	return &ndp.PrefixInformation{PrefixLength: uint8(p.Bits()), Prefix: p.Addr(), OnLink: true,
		AutonomousAddressConfiguration: true, ValidLifetime: valid, PreferredLifetime: preferred}
}

// TestACopyOfTheRoutersRAIsNotBelieved: radvd answers solicitations to all
// nodes (AdvRASolicitedUnicast off: RFC 4861 lets it hold its answer until
// 3 s after its last multicast RA, plus up to 0.5 s). A host on the router's
// link-local address sends a copy of radvd's RA every 150 ms - faster than
// the router, so it is heard just after each of the router's multicast RAs
// and answers each solicitation at once - first with its own prefix, then
// with words that change nothing preferred (A listed twice, the second time
// deprecated; a prefix added deprecated, valid for ever; A's lifetimes set to
// infinite). No agent ever reports any of it, and every agent reports the
// conflict. Then a real renumbering lands.
func TestACopyOfTheRoutersRAIsNotBelieved(t *testing.T) {
	w := newWorld(t, 2)
	w.Net.Router.MulticastAnswers = true
	advertise(t, w, prefixA)
	trusted := trustingHome(t, w, nil)
	nodes := []string{"node1", "node2"}
	for _, n := range nodes {
		startAgent(t, w, n, "--conflict-hold", "15s")
	}
	for _, n := range nodes {
		waitDigest(t, w, n, "A", has(prefixA, false, digest.SourceRA))
	}
	sender := impostorSender(t, w, trusted)
	prefixZ := netip.MustParsePrefix("2001:db8:bad:2::/64")
	for _, tc := range []struct {
		name  string
		spoof []*ndp.PrefixInformation
	}{
		{"its own prefix", []*ndp.PrefixInformation{pioOf(prefixX, 600*time.Second, 300*time.Second)}},
		{"A listed twice, the second time deprecated", []*ndp.PrefixInformation{pioOf(prefixA, 600*time.Second, 300*time.Second), pioOf(prefixA, 600*time.Second, 0)}},
		{"a prefix added deprecated, valid for ever", []*ndp.PrefixInformation{pioOf(prefixA, 600*time.Second, 300*time.Second), pioOf(prefixZ, ndp.Infinity, 0)}},
		{"A's lifetimes infinite", []*ndp.PrefixInformation{pioOf(prefixA, ndp.Infinity, ndp.Infinity)}},
	} {
		b := copyOfRadvd(t, tc.spoof)
		bad := ""
		for end := time.Now().Add(15 * time.Second); time.Now().Before(end) && bad == ""; time.Sleep(150 * time.Millisecond) {
			if err := sender.Send(trusted, b); err != nil {
				t.Fatalf("spoofing: %v", err)
			}
			for _, n := range nodes {
				v, _ := annotation(t, w, n)
				if strings.Contains(v, prefixX.Addr().String()) || strings.Contains(v, prefixZ.Addr().String()) || !strings.Contains(v, prefixA.String()+" p ra") {
					bad = n + ": " + v
				}
			}
		}
		if bad != "" {
			t.Errorf("%s: an agent believed it: %s", tc.name, bad)
		}
	}
	for _, n := range nodes {
		if v, _ := annotation(t, w, n); !strings.Contains(v, "eth0 conflict") {
			t.Errorf("%s does not report the conflict: %s", n, v)
		}
	}
	// The host is gone; the router renumbers: it lands on every node.
	advertise(t, w, prefixB, prefixA)
	for _, n := range nodes {
		waitDigest(t, w, n, "B", has(prefixB, false, digest.SourceRA))
	}
}

// TestAnOptionTheAgentCannotDecodeSkipsOnlyItself: a router whose RAs carry
// an RDNSS option with no server (which the NDP library refuses) beside its
// prefix: the prefix is reported all the same.
func TestAnOptionTheAgentCannotDecodeSkipsOnlyItself(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	startAgent(t, w, "node1")
	rogue, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	sender, err := rogue.Sender()
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	b := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixB, 600*time.Second, 300*time.Second)})
	// RFC 8106's RDNSS option, length 1: a lifetime and no address.
	b = append(b[:16:16], append([]byte{25, 1, 0, 0, 0, 0, 0x0e, 0x10}, b[16:]...)...)
	done := make(chan struct{})
	defer close(done)
	go func() {
		// Every 300 ms, as a router answering every solicitation would.
		for {
			select {
			case <-done:
				return
			case <-time.After(300 * time.Millisecond):
				_ = sender.Send(netip.Addr{}, b)
			}
		}
	}()
	waitDigest(t, w, "node1", "B", has(prefixB, false, digest.SourceRA))
}
