package e2e

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// TestDynamicPrefixesSetWhatAgentsReport: the agent lists and watches the
// DynamicPrefixes (with its own small API client). One that turns the
// global-unicast filter off makes the agent report the router's ULA prefix;
// once it is deleted, the ULA is filtered out again. The agent writes its
// Node each time, nothing else.
func TestDynamicPrefixesSetWhatAgentsReport(t *testing.T) {
	w := homeWorld(t, 1)
	ctx := t.Context()
	ula := netip.MustParsePrefix("fd00:42:0:1::/64")
	if err := w.Net.Router.Advertise(ctx,
		world.Advert{Prefix: prefixA, Valid: 600 * time.Second, Preferred: 300 * time.Second},
		world.Advert{Prefix: ula, Valid: 600 * time.Second, Preferred: 300 * time.Second},
	); err != nil {
		t.Fatal(err)
	}
	lacksULA := func(n digest.Node) bool { _, ok := find(n, ula); return !ok }
	startAgent(t, w, "node1")
	waitDigest(t, w, "node1", "A, the ULA filtered", all(has(prefixA, false, digest.SourceRA), lacksULA))
	settleWrites()

	m := mark(t, w)
	createDP(t, w, "lab", map[string]any{"acquisition": map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0"},
		"prefixFilter":        map[string]any{"requireGlobalUnicast": false},
	}})
	waitDigest(t, w, "node1", "the ULA reported", all(has(prefixA, false, digest.SourceRA), has(ula, false, digest.SourceRA)))

	if err := w.API.Dynamic.Resource(api.GVR).Delete(ctx, "lab", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDigest(t, w, "node1", "the ULA filtered again", all(has(prefixA, false, digest.SourceRA), lacksULA))
	settleWrites()
	ws := writesBy(t, w, m, agentUser)
	if len(ws) != 2 {
		t.Errorf("agent writes %v, want two patches of node1", ws)
	}
	for _, wr := range ws {
		if wr.Verb != "patch" || wr.Resource != "nodes" || wr.Name != "node1" {
			t.Errorf("agent wrote %s", wr)
		}
	}
}
