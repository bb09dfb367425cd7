package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
)

// TestTheWriterIsNotStoppedByAConfirmerNamedAsItsOwnClient (issue 42, found
// by the fourth red team): one node, n1, runs the DHCPv6 client (nodeNames
// unset; the other nodes do not follow the PD interface, or have not
// joined). A stolen token wrote status.dhcpv6pd {clientNode: n1,
// confirmerNode: n1}, and it was admitted; the writer, finding no other
// node to confirm, writes no confirmer (decide.roles never names the
// client), which the rule that keeps a confirmer once named refused - on
// every pass, so the status stayed where the token left it and a rotation
// never landed. Now the token's write is refused (the confirmer is never
// the client), and a status left so by someone else does not stop the
// writer: it may drop a confirmer that was the client.
func TestTheWriterIsNotStoppedByAConfirmerNamedAsItsOwnClient(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"dhcpv6pd": map[string]any{"interface": "wan"}}})
	if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(s.ctx, "home", types.MergePatchType, []byte(
		`{"status":{"currentPrefix":"2001:db8:1::/64","history":[{"prefix":"2001:db8:1::/64","state":"active","acquiredAt":"2026-11-29T00:00:00Z"}],`+
			`"dhcpv6pd":{"clientNode":"n1","validLifetime":3600}}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	selfConfirmed := `{"status":{"dhcpv6pd":{"confirmerNode":"n1"}}}`
	if err := s.patch(api.GVR, "", "home", selfConfirmed, "status"); !denied(err) {
		t.Errorf("the token named n1, the client, its own confirmer: %s", errString(err))
	}
	// Left so by someone the policy does not hold (the user, or a status
	// written before the rule), the writer's next write still goes through.
	if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(s.ctx, "home", types.MergePatchType, []byte(selfConfirmed), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	n1 := decide.Report{Node: "n1", Digest: digest.Node{Links: []digest.Link{{Name: "wan", Prefixes: []digest.Prefix{
		{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Sources: digest.SourcePD, Remaining: time.Hour}}}}}}
	st, wrote, err := s.writerPass(t, "the writer's pass", []decide.Report{n1}, passTime)
	if !wrote {
		t.Fatal("the writer writes nothing: no hole here")
	}
	t.Logf("the writer's dhcpv6pd: %+v", st.DHCPv6PD)
	if err != nil {
		t.Errorf("the writer's status write after the token named n1 its own confirmer: %v", err)
	}
}

// TestNoDHCPv6PDStatusAStolenWriterTokenLeavesStopsTheWriter extends
// TestNoStatusAStolenWriterTokenLeavesStopsTheWriter's generator (fourth red
// team) to a DynamicPrefix that follows a delegation: each step the user
// may edit spec.acquisition.dhcpv6pd.nodeNames, the token writes the status
// as it is with history moves (statusGen) or status.dhcpv6pd moves (the
// roles, validLifetime, the times, the backing), and the writer makes its
// pass over one to three nodes' digests (each holding or offered one of two
// delegations on wan). The property: the writer's status write is admitted.
func TestNoDHCPv6PDStatusAStolenWriterTokenLeavesStopsTheWriter(t *testing.T) {
	pdSpec := func(nodeNames []any) map[string]any {
		pd := map[string]any{"interface": "wan"}
		if nodeNames != nil {
			pd["nodeNames"] = nodeNames
		}
		return map[string]any{"acquisition": map[string]any{"routerAdvertisement": map[string]any{"enabled": false}, "dhcpv6pd": pd,
			"prefixFilter": map[string]any{"minPrefixLength": 48, "maxPrefixLength": 64}}}
	}
	s := stealWriterToken(t, pdSpec(nil))
	g := statusGen{rand.New(rand.NewPCG(42, 4))}
	nodes := []string{"n1", "n2", "n3"}
	pick := func(from ...any) any { return from[g.IntN(len(from))] }
	const steps = 200
	var admitted, written, refused int
	now := passTime
	for step := range steps {
		if g.IntN(10) == 0 { // the user edits nodeNames
			names, _ := pick(nil, []any{"n1"}, []any{"n1", "n2"}, []any{"n1", "n2", "n3"}, []any{"n2", "n3"}).([]any)
			setSpec(t, s, pdSpec(names))
		}
		before := s.read(t, api.GVR, "", "home").Object["status"].(map[string]any)
		var bodies []string
		if g.IntN(2) == 0 {
			bodies = g.write(before, now)
		} else {
			pd := map[string]any{}
			for range 1 + g.IntN(3) {
				switch g.IntN(7) {
				case 0:
					pd["clientNode"] = pick(nil, "n1", "n2", "n3", "n9")
				case 1:
					pd["confirmerNode"] = pick(nil, "n1", "n2", "n3", "n9")
				case 2:
					pd["validLifetime"] = pick(nil, 1, 600, 3600, 86400)
				case 3:
					k := pick("since", "unconfirmedSince", "otherOffered").(string)
					pd[k] = pick(nil, g.time(now.Add(time.Duration(g.IntN(7200)-3600)*time.Second)))
				case 4:
					pd["backing"] = pick(nil, "2001:db8:4::/64", "2001:db8:1::/64")
					pd["backedAgainst"] = pick(nil, "2001:db8:1::/64")
					pd["backingKept"] = pick(nil, true)
				case 5:
					pd["unconfirmed"] = pick(nil, "2001:db8:4::/64", "2001:db8:1::/64")
				case 6:
					pd["clientNode"], pd["confirmerNode"] = "n1", "n1"
				}
			}
			b, _ := json.Marshal(map[string]any{"status": map[string]any{"dhcpv6pd": pd}})
			bodies = []string{string(b)}
		}
		var err error
		for _, b := range bodies {
			err = s.patch(api.GVR, "", "home", b, "status")
		}
		if err == nil {
			admitted++
		}
		body := strings.Join(bodies, " then ")
		var reports []decide.Report
		for _, n := range nodes[:1+g.IntN(3)] {
			var ps []digest.Prefix
			if held := pick("", "2001:db8:1::/64", "2001:db8:4::/64").(string); held != "" {
				ps = append(ps, digest.Prefix{Prefix: netip.MustParsePrefix(held), Sources: digest.SourcePD, Remaining: time.Hour})
			}
			if offered := pick("", "2001:db8:1::/64", "2001:db8:4::/64").(string); offered != "" {
				ps = append(ps, digest.Prefix{Prefix: netip.MustParsePrefix(offered), Sources: digest.SourceOffer, Remaining: time.Hour})
			}
			reports = append(reports, decide.Report{Node: n, Digest: digest.Node{Links: []digest.Link{{Name: "wan", Prefixes: ps}}}})
		}
		what := fmt.Sprintf("step %d (the token's write %s)", step, trim(body))
		st, wrote, err := s.writerPass(t, what, reports, now)
		now = now.Add(time.Duration(g.IntN(3600)) * time.Second)
		if !wrote {
			continue
		}
		written++
		if err != nil {
			refused++
			if refused <= 5 {
				t.Errorf("%s: the writer's status write refused (the writer's dhcpv6pd %+v): %v", what, st.DHCPv6PD, err)
			}
		}
	}
	t.Logf("%d token writes, %d admitted; %d writer writes, %d refused", steps, admitted, written, refused)
}
