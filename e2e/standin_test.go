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

// TestASpoofedDeprecatedPrefixNeverStandsIn (issue 42): radvd advertises
// the ULA preferred and the ISP's prefix A only deprecated (AdvPreferredLifetime
// 0, valid 10 minutes); the DynamicPrefix trusts the router's address alone
// and follows a deprecated prefix (followDeprecated), so A stands in. A host
// on the router's link-local address sends radvd's RA with one prefix added,
// deprecated and valid for ever - the longest valid lifetime on the link,
// which would win the stand-in - every 150 ms for 20 s. No agent ever reports
// that prefix, A keeps standing in, the pool and status stay on A, and the
// agents report the conflict. The host gone, the router renumbers the
// deprecated ISP prefix to B (A left with 5 minutes): it lands on every node
// and in the pool.
func TestASpoofedDeprecatedPrefixNeverStandsIn(t *testing.T) {
	w := newWorld(t, 2)
	w.Net.Router.MulticastAnswers = true
	ula := netip.MustParsePrefix("fd01:203:405:1::/64")
	announce := func(cur netip.Prefix, old ...netip.Prefix) {
		t.Helper()
		ads := []world.Advert{{Prefix: ula, Valid: 600 * time.Second, Preferred: 300 * time.Second},
			{Prefix: cur, Valid: 600 * time.Second, Preferred: 0}}
		for _, o := range old {
			ads = append(ads, world.Advert{Prefix: o, Valid: 300 * time.Second, Preferred: 0})
		}
		if err := w.Net.Router.Advertise(t.Context(), ads...); err != nil {
			t.Fatal(err)
		}
	}
	announce(prefixA)
	trusted := trustingHome(t, w, map[string]any{"routerAdvertisement": map[string]any{"followDeprecated": true}})
	createPool(t, w)
	nodes := []string{"node1", "node2"}
	for _, n := range nodes {
		startAgent(t, w, n, "--conflict-hold", "15s")
	}
	for _, n := range nodes {
		waitDigest(t, w, n, "A stands in", has(prefixA, false, digest.SourceRA))
	}
	startWriter(t, w, "writer-a")
	poolIs(t, w, "the pool follows A", prefixA.String())
	settleWrites()

	m := mark(t, w)
	sender := impostorSender(t, w, trusted)
	forever := netip.MustParsePrefix("2001:db8:bad:3::/64")
	spoof := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(ula, 600*time.Second, 300*time.Second),
		pioOf(prefixA, 600*time.Second, 0), pioOf(forever, ndp.Infinity, 0)})
	bad := ""
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && bad == ""; time.Sleep(150 * time.Millisecond) {
		if err := sender.Send(trusted, spoof); err != nil {
			t.Fatalf("spoofing: %v", err)
		}
		for _, n := range nodes {
			if v, _ := annotation(t, w, n); strings.Contains(v, forever.Addr().String()) || !strings.Contains(v, prefixA.String()+" p ra") {
				bad = n + ": " + v
			}
		}
	}
	if bad != "" {
		t.Errorf("an agent believed the spoofed prefix, or A stopped standing in: %s", bad)
	}
	for _, n := range nodes {
		if v, _ := annotation(t, w, n); !strings.Contains(v, "eth0 conflict") {
			t.Errorf("%s does not report the conflict: %s", n, v)
		}
	}
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != prefixA.String() {
		t.Errorf("the spoofer moved the prefix to %s", st.CurrentPrefix)
	}
	for _, wr := range objectWrites(writesBy(t, w, m, writerUser)) {
		if strings.HasPrefix(wr, "patch ciliumloadbalancerippools") {
			t.Errorf("the spoofer made the writer write %s", wr)
		}
	}

	// The host is gone; the router renumbers its deprecated ISP prefix.
	sender.Close()
	announce(prefixB, prefixA)
	for _, n := range nodes {
		waitDigest(t, w, n, "B stands in", has(prefixB, false, digest.SourceRA))
	}
	poolIs(t, w, "the pool follows B, A draining", prefixB.String(), prefixA.String())
}
