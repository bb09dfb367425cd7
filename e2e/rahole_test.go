package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// The RA red team's holes that stayed open (issue 42), in the world: a real
// radvd, and a host on its link-local address.

// spoofTwice sends spoof from the router's address, and again 700 ms later
// (the agent solicits meanwhile: it is the answer, at once).
func spoofTwice(t *testing.T, sender *world.RASender, trusted netip.Addr, spoof []byte) {
	t.Helper()
	for _, pause := range []time.Duration{700 * time.Millisecond, 0} {
		if err := sender.Send(trusted, spoof); err != nil {
			t.Fatalf("spoofing: %v", err)
		}
		time.Sleep(pause)
	}
}

// neverBelieved fails if the agent's digest carries prefix X within d, and
// then if the conflict is not reported.
func neverBelieved(t *testing.T, w *world.World, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if v, _ := annotation(t, w, "node1"); strings.Contains(v, prefixX.Addr().String()) {
			t.Fatalf("the agent believed the spoofer: %s", v)
		}
	}
	if v, _ := annotation(t, w, "node1"); !strings.Contains(v, "eth0 conflict") {
		t.Errorf("the conflict is not reported: %s", v)
	}
}

// TestASpooferAfterRadvdStopsUnicastingItsAnswersIsNotBelieved: radvd
// answers solicitations unicast (its defaults), and the agent learns so.
// radvd is then reloaded with AdvRASolicitedUnicast off (the same prefix):
// in its initial phase it holds a rate-limited answer 16 s. A host on its
// link-local address offers its own prefix just after the reload RA, and
// again as the agent's solicitation's answer. Before, the agent kept the
// 0.75 s window it had learnt, and believed the spoofer; now what was learnt
// holds only for a solicitation 3 s after the address's last multicast RA
// before the spoofer spoke, so it waits, asks again, and radvd's answer
// contradicts the spoofer.
func TestASpooferAfterRadvdStopsUnicastingItsAnswersIsNotBelieved(t *testing.T) {
	w := newWorld(t, 1)
	w.Net.Router.Intervals = [2]time.Duration{198 * time.Second, 600 * time.Second}
	advertise(t, w, prefixA)
	trusted := trustingHome(t, w, nil)
	startAgent(t, w, "node1", "--conflict-hold", "60s")
	waitDigest(t, w, "node1", "A", has(prefixA, false, digest.SourceRA))
	eventually(t, "the router is learnt to answer unicast", func() (bool, string) {
		got := agentMetric(t, w, "node1", `renumber_agent_router_answer_mode{link="eth0",mode="unicast"}`)
		return got == 1, fmt.Sprintf("unicast %v", got)
	})
	sender := impostorSender(t, w, trusted)
	spoof := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixX, 600*time.Second, 300*time.Second)})

	w.Net.Router.MulticastAnswers = true
	advertise(t, w, prefixA) // the reload RA at once; radvd's initial phase
	time.Sleep(200 * time.Millisecond)
	spoofTwice(t, sender, trusted, spoof)
	neverBelieved(t, w, 25*time.Second)
}

// TestASpooferIsContradictedByARouterOfferingNothing: radvd advertises A,
// then no prefix at all (a home router that lost its ISP prefix). The agent
// deprecates nothing on that (A is left to the lifetimes radvd stated). A
// host on radvd's link-local address then offers its own prefix, and again
// as the answer to the agent's solicitation. Before, an RA with no prefix
// option was nobody's word, and the spoofer's prefix was believed, no
// conflict; now radvd's answer, offering nothing, contradicts it.
func TestASpooferIsContradictedByARouterOfferingNothing(t *testing.T) {
	w := newWorld(t, 1)
	advertise(t, w, prefixA)
	trusted := trustingHome(t, w, nil)
	startAgent(t, w, "node1", "--conflict-hold", "60s")
	waitDigest(t, w, "node1", "A", has(prefixA, false, digest.SourceRA))
	if err := w.Net.Router.Advertise(t.Context()); err != nil { // no prefix
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // radvd's RAs, every 3-4 s
	if v, _ := annotation(t, w, "node1"); !strings.Contains(v, prefixA.String()+" p") || strings.Contains(v, "conflict") {
		t.Fatalf("after RAs offering nothing: %s, want A preferred, no conflict", v)
	}
	sender := impostorSender(t, w, trusted)
	spoof := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixX, 600*time.Second, 300*time.Second)})
	spoofTwice(t, sender, trusted, spoof)
	neverBelieved(t, w, 25*time.Second)
}
