package render

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"
)

func TestOverlappingNamesTheDynamicPrefixesSharingAnAddress(t *testing.T) {
	m := model.Model{Name: "home", Delegated: 56}
	space := Space(m, []netip.Prefix{netip.MustParsePrefix("2001:db8:a:1::/64")})
	if diff := cmp.Diff([]netip.Prefix{netip.MustParsePrefix("2001:db8:a:1::/64"), netip.MustParsePrefix("2001:db8:a::/56")}, space, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("Space (-want +got):\n%s", diff)
	}
	others := map[string][]netip.Prefix{
		"same":       StatusSpace(api.Status{CurrentPrefix: "2001:db8:a:1::/64"}),
		"subnet":     StatusSpace(api.Status{CurrentPrefix: "2001:db8:a:ff::/64"}),
		"draining":   StatusSpace(api.Status{CurrentPrefix: "2001:db8:c::/64", History: []api.HistoryEntry{{Prefix: "2001:db8:a:1::/64", State: model.StateDraining}}}),
		"expired":    StatusSpace(api.Status{CurrentPrefix: "2001:db8:c::/64", History: []api.HistoryEntry{{Prefix: "2001:db8:a:1::/64", State: model.StateExpired}}}),
		"elsewhere":  StatusSpace(api.Status{CurrentPrefix: "2001:db8:b::/64", DelegatedPrefix: "2001:db8:b::/56"}),
		"unacquired": StatusSpace(api.Status{}),
	}
	if diff := cmp.Diff([]string{"draining", "same", "subnet"}, Overlapping(space, others)); diff != "" {
		t.Errorf("Overlapping (-want +got):\n%s", diff)
	}
}
