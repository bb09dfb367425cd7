package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/digest"
)

// TestASpooferInRadvdsInitialPhaseIsNotBelieved: radvd answers solicitations
// to all nodes (AdvRASolicitedUnicast off) and advertises every 30-60 s.
// After a reload (a renumbering is one) it is in its initial phase: a
// solicitation within 3 s of its last multicast RA is answered 16 s after it
// (reschedule_iface), past RFC 4861's 3.5 s. A host on the router's
// link-local address offers its own prefix just after the reload RA and
// again once the agent has solicited (its answer, at once), then is quiet:
// with a window of 3.5 s from its last multicast RA the agent believed it
// before radvd answered. Now that solicitation's window waits for the
// initial phase, and the agent asks again 3 s after the last multicast RA,
// which radvd answers at once: its answer contradicts the spoofer, and the
// conflict is reported.
func TestASpooferInRadvdsInitialPhaseIsNotBelieved(t *testing.T) {
	w := newWorld(t, 1)
	w.Net.Router.MulticastAnswers = true
	w.Net.Router.Intervals = [2]time.Duration{30 * time.Second, 60 * time.Second}
	advertise(t, w, prefixA)
	trusted := trustingHome(t, w, nil)
	startAgent(t, w, "node1", "--conflict-hold", "60s")
	waitDigest(t, w, "node1", "A", has(prefixA, false, digest.SourceRA))
	sender := impostorSender(t, w, trusted)
	spoof := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixX, 600*time.Second, 300*time.Second)})

	advertise(t, w, prefixA) // a reload: radvd's initial phase, its reload RA at once
	time.Sleep(200 * time.Millisecond)
	for _, pause := range []time.Duration{700 * time.Millisecond, 0} {
		if err := sender.Send(trusted, spoof); err != nil {
			t.Fatalf("spoofing: %v", err)
		}
		time.Sleep(pause) // the agent solicits meanwhile; radvd holds its answer 16 s
	}
	for end := time.Now().Add(25 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if v, _ := annotation(t, w, "node1"); strings.Contains(v, prefixX.Addr().String()) {
			t.Fatalf("the agent believed the spoofer before radvd answered: %s", v)
		}
	}
	if v, _ := annotation(t, w, "node1"); !strings.Contains(v, "eth0 conflict") {
		t.Errorf("the conflict is not reported: %s", v)
	}
}
