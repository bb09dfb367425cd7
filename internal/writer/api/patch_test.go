package api

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
)

// A merge patch leaves alone what it does not mention: a status field the
// writer no longer sets (the DHCPv6 client's node after a switch to host
// mode, an emptied history) must be cleared with null, or the live status
// never equals the rendered one and every pass would write it again.
func TestAStatusPatchClearsWhatTheStatusNoLongerHas(t *testing.T) {
	live := Status{CurrentPrefix: "2001:db8:a00::/56", DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "node1"},
		History: []HistoryEntry{{Prefix: "2001:db8:a00::/56", State: model.StateActive}}}
	st := Status{CurrentPrefix: "2001:db8:a00::/56"}
	patch, err := StatusPatch(live, st)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(patch)
	if want := `{"currentPrefix":"2001:db8:a00::/56","dhcpv6pd":null,"history":null}`; string(got) != want {
		t.Errorf("patch %s, want %s", got, want)
	}
}

// The same holds inside status.dhcpv6pd: a merge patch merges objects key by
// key, so the since and unconfirmed of a disagreement that ended, or the
// confirmer of a cluster that now trusts one node, are sent as null. A
// since left behind would let the next disagreement skip its bound. The
// patch is applied as the API server applies a merge patch (RFC 7386).
func TestAStatusPatchClearsWhatANestedObjectNoLongerHas(t *testing.T) {
	live := Status{CurrentPrefix: "2001:db8:a00::/56",
		DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "node2", ConfirmerNode: "node3", Unconfirmed: "2001:db8:bad::/56", Since: "2026-11-28T13:10:43Z"}}
	want := Status{CurrentPrefix: "2001:db8:a00::/56", DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "node2"}}
	if diff := cmp.Diff(want, mergeStatus(t, live, want)); diff != "" {
		t.Errorf("stored status (-want +got):\n%s", diff)
	}
}

// mergeStatus is live after the API server applies StatusPatch(live, st).
func mergeStatus(t *testing.T, live, st Status) Status {
	t.Helper()
	patch, err := StatusPatch(live, st)
	if err != nil {
		t.Fatal(err)
	}
	from, _ := json.Marshal(live)
	p, _ := json.Marshal(patch)
	merged, err := jsonpatch.MergePatch(from, p)
	if err != nil {
		t.Fatal(err)
	}
	var got Status
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatal(err)
	}
	return got
}
