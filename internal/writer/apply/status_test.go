package apply

import (
	"encoding/json"
	"testing"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
)

// A merge patch leaves alone what it does not mention: a status field the
// writer no longer sets (the DHCPv6 client's node after a switch to host
// mode, an emptied history) must be cleared with null, or the live status
// never equals the rendered one and every pass would write it again.
func TestAStatusPatchClearsWhatTheStatusNoLongerHas(t *testing.T) {
	live := api.Status{CurrentPrefix: "2001:db8:a00::/56", DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "node1"},
		History: []api.HistoryEntry{{Prefix: "2001:db8:a00::/56", State: api.StateActive}}}
	st := api.Status{CurrentPrefix: "2001:db8:a00::/56"}
	patch, err := statusPatch(live, st)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(patch)
	if want := `{"currentPrefix":"2001:db8:a00::/56","dhcpv6pd":null,"history":null}`; string(got) != want {
		t.Errorf("patch %s, want %s", got, want)
	}
}
