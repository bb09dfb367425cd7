package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
)

// TestTheAgentLearnsHowTheRouterAnswers: radvd answers solicitations
// unicast (its default) or to all nodes (AdvRASolicitedUnicast off). From
// its first solicitations on, the agent learns which - the unicast mode only
// where no multicast RA came when a multicasting router's answer would have -
// and reports it (renumber_agent_router_answer_mode); a router that
// multicasts its answers is never taken for one that unicasts them. A
// renumbering then lands, and the mode holds.
//
// The unicasting radvd advertises as it does by default (every 198-600 s,
// its first three RAs 16 s apart): one advertising every 3-4 s puts a
// multicast RA in most probes' windows, and in every one with the default
// margin (answer.go). The multicasting one advertises every 3-4 s: radvd
// 2.19 in this world answered a solicitation, or a reload, with
// AdvRASolicitedUnicast off only at its next timer (16 s after a reload with
// the default intervals; bench/results.md).
func TestTheAgentLearnsHowTheRouterAnswers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		multicast bool
		intervals [2]time.Duration
		want      string
	}{
		{"unicast, radvd's default", false, [2]time.Duration{198 * time.Second, 600 * time.Second}, "unicast"},
		{"to all nodes, AdvRASolicitedUnicast off", true, [2]time.Duration{}, "multicast"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 1)
			w.Net.Router.MulticastAnswers = tc.multicast
			w.Net.Router.Intervals = tc.intervals
			advertise(t, w, prefixA)
			trustingHome(t, w, nil)
			startAgent(t, w, "node1")
			waitDigest(t, w, "node1", "A", has(prefixA, false, digest.SourceRA))
			sample := func(mode string) float64 {
				return agentMetric(t, w, "node1", fmt.Sprintf(`renumber_agent_router_answer_mode{link="eth0",mode=%q}`, mode))
			}
			learnt := func() (bool, string) {
				got := fmt.Sprintf("unicast %v, multicast %v, unknown %v", sample("unicast"), sample("multicast"), sample("unknown"))
				if tc.multicast && sample("unicast") > 0 {
					t.Fatalf("a router multicasting its answers taken for one unicasting them: %s", got)
				}
				return sample(tc.want) == 1, got
			}
			eventually(t, "the router is learnt to answer "+tc.want, learnt)
			advertise(t, w, prefixB, prefixA)
			waitDigest(t, w, "node1", "B", has(prefixB, false, digest.SourceRA))
			if ok, got := learnt(); !ok {
				t.Errorf("after the renumbering: %s", got)
			}
		})
	}
}
