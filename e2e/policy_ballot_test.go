package e2e

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
)

// TestAStolenWriterTokenBackdatesNoDrainAndForgesNoBallotMemory (issue 42,
// the second red team's "reasoned only") plays the stolen writer token
// against the two parts of the DynamicPrefix status renumber-writer-status
// left open: the times of a renumbering (a drain's deprecatedAt, which
// drainBound bounds it by, was the token's to choose at the transition) and
// status.dhcpv6pd, the ballot's memory of the agents' DHCPv6 client, which
// no policy read. Each forged write is refused; the writer's own moves,
// beside each, are admitted.
//
// home: mode client on wan, nodeNames n1-n3; current 2001:db8:1::/64,
// acquired 2029-01-01, client n1, confirmer n2, validLifetime 3600.
func TestAStolenWriterTokenBackdatesNoDrainAndForgesNoBallotMemory(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"dhcpv6pd":     map[string]any{"interface": "wan", "nodeNames": []any{"n1", "n2", "n3"}},
		"prefixFilter": map[string]any{"allowedPrefixes": []any{"2001:db8::/40"}, "maxPrefixLength": 64}}})
	admin := func(body string) {
		t.Helper()
		if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(s.ctx, "home", types.MergePatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	const (
		active   = `{"prefix":"2001:db8:1::/64","state":"active","acquiredAt":"2029-01-01T00:00:00Z"}`
		draining = `{"prefix":"2001:db8:2::/64","state":"draining","deprecatedAt":"2029-01-01T00:00:00Z","expiresAt":"2029-01-02T00:00:00Z"}`
		pd       = `"dhcpv6pd":{"clientNode":"n1","confirmerNode":"n2","validLifetime":3600,"unconfirmed":null,"since":null,` +
			`"backing":null,"backedAgainst":null,"backingKept":null,"otherOffered":null,"unconfirmedSince":null}`
	)
	reset := func() {
		t.Helper()
		admin(`{"status":{"currentPrefix":"2001:db8:1::/64","history":[` + active + `,` + draining + `],` + pd + `}}`)
	}
	refused := func(name, body string) {
		t.Helper()
		reset()
		if err := s.patch(api.GVR, "", "home", body, "status"); !denied(err) {
			t.Errorf("%s: %s", name, errString(err))
		}
	}
	admitted := func(name, body string) {
		t.Helper()
		reset()
		if err := s.patch(api.GVR, "", "home", body, "status"); err != nil {
			t.Errorf("the writer's own move, %s: %v", name, err)
		}
	}
	// renumbered is 2001:db8:1::/64 replaced by 2001:db8:4::/64 at
	// deprecated (the old entry's deprecatedAt) and acquired (the new
	// one's acquiredAt).
	renumbered := func(deprecated, acquired string) string {
		return `{"status":{"currentPrefix":"2001:db8:4::/64","history":[` +
			`{"prefix":"2001:db8:4::/64","state":"active","acquiredAt":"` + acquired + `"},` +
			`{"prefix":"2001:db8:1::/64","state":"draining","acquiredAt":"2029-01-01T00:00:00Z","deprecatedAt":"` + deprecated + `","expiresAt":"2030-01-01T00:00:00Z"},` +
			draining + `]}}`
	}
	// Control: the policy is loaded and reads the history.
	refused("control: an entry without a state", `{"status":{"history":[`+active+`,{"prefix":"2001:db8:2::/64"}]}}`)

	// The renumbering, as decide's history writes it: one time for both.
	admitted("a renumbering", renumbered("2029-06-01T00:00:00Z", "2029-06-01T00:00:00Z"))
	refused("the replaced prefix deprecated before it was acquired", renumbered("2028-12-31T23:59:59Z", "2028-12-31T23:59:59Z"))
	refused("the drain begun a day before the new prefix was acquired", renumbered("2029-05-31T00:00:00Z", "2029-06-01T00:00:00Z"))
	refused("the replaced prefix draining without a deprecatedAt", `{"status":{"currentPrefix":"2001:db8:4::/64","history":[`+
		`{"prefix":"2001:db8:4::/64","state":"active","acquiredAt":"2029-06-01T00:00:00Z"},{"prefix":"2001:db8:1::/64","state":"draining"},`+draining+`]}}`)
	refused("the replaced prefix draining with its acquiredAt dropped, deprecated before it was acquired", `{"status":{"currentPrefix":"2001:db8:4::/64","history":[`+
		`{"prefix":"2001:db8:4::/64","state":"active","acquiredAt":"2028-01-01T00:00:00Z"},`+
		`{"prefix":"2001:db8:1::/64","state":"draining","deprecatedAt":"2028-01-01T00:00:00Z"},`+draining+`]}}`)
	refused("the current prefix's acquiredAt moved back", `{"status":{"history":[`+
		`{"prefix":"2001:db8:1::/64","state":"active","acquiredAt":"2020-01-01T00:00:00Z"},`+draining+`]}}`)
	refused("the current prefix's acquiredAt dropped", `{"status":{"history":[{"prefix":"2001:db8:1::/64","state":"active"},`+draining+`]}}`)
	admitted("the status as it was", `{"status":{"currentPrefix":"2001:db8:1::/64","history":[`+active+`,`+draining+`],`+pd+`}}`)

	// status.dhcpv6pd: the writer's moves, then the token's.
	for name, body := range map[string]string{
		"a disagreement begun":     `{"status":{"dhcpv6pd":{"unconfirmed":"2001:db8:5::/56","since":"2029-06-01T00:00:00Z"}}}`,
		"a rotation":               `{"status":{"dhcpv6pd":{"confirmerNode":"n3","since":"2029-06-01T00:02:00Z","backing":"2001:db8:5::/56","backedAgainst":"2001:db8:1::/64","backingKept":true}}}`,
		"a takeover":               `{"status":{"dhcpv6pd":{"clientNode":"n2","confirmerNode":"n3"}}}`,
		"a shorter lifetime heard": `{"status":{"dhcpv6pd":{"validLifetime":600,"otherOffered":"2029-06-01T00:00:00Z","unconfirmedSince":"2029-06-01T00:00:00Z"}}}`,
		"a renumbering, a longer lifetime heard for the new prefix": `{"status":{"currentPrefix":"2001:db8:4::/64","history":[` +
			`{"prefix":"2001:db8:4::/64","state":"active","acquiredAt":"2029-06-01T00:00:00Z"},` +
			`{"prefix":"2001:db8:1::/64","state":"draining","acquiredAt":"2029-01-01T00:00:00Z","deprecatedAt":"2029-06-01T00:00:00Z","expiresAt":"2029-06-01T01:00:00Z"},` +
			draining + `],"dhcpv6pd":{"validLifetime":7200}}}`,
	} {
		admitted(name, body)
	}
	for name, body := range map[string]string{
		"since not a time the writer writes":          `{"status":{"dhcpv6pd":{"since":"yesterday"}}}`,
		"unconfirmedSince with a zone":                `{"status":{"dhcpv6pd":{"unconfirmedSince":"2000-01-01T00:00:00+01:00"}}}`,
		"validLifetime raised while the prefix stays": `{"status":{"dhcpv6pd":{"validLifetime":7200}}}`,
		"backingKept without a backing":               `{"status":{"dhcpv6pd":{"backingKept":true}}}`,
		"backedAgainst without a backing":             `{"status":{"dhcpv6pd":{"backedAgainst":"2001:db8:1::/64"}}}`,
		"a client nodeNames does not name":            `{"status":{"dhcpv6pd":{"clientNode":"n9"}}}`,
		"a confirmer nodeNames does not name":         `{"status":{"dhcpv6pd":{"confirmerNode":"n9"}}}`,
		"the confirmer dropped":                       `{"status":{"dhcpv6pd":{"confirmerNode":null}}}`,
		"the ballot's memory dropped":                 `{"status":{"dhcpv6pd":null}}`,
	} {
		refused(name, body)
	}
}
