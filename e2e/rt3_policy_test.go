package e2e

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/api"
)

// Red team r3 (issue 42, a stolen writer token): renumber-writer-status
// checks a prefix made current against the spec's prefixFilter with the
// policy's own length defaults, 0 to 128, where the filter sets none -
// while the writer adopts only within the acquisition's defaults
// (model.lengthBounds: an RA's prefix is a /64, a delegation /48 to /64;
// "a forged 2000::/3 is never current unless the user widens them"). So the
// token names 2000::/3 current (the old current draining: it was current),
// and the value policy, which trusts the status, admits any global address
// on any Service following home: one status write, and every Service's
// address is anywhere in the Internet's unicast space. docs/security.md says
// the token can name only "any global unicast prefix within the length
// bounds". home: routerAdvertisement only, no prefixFilter (the default).
func TestRT3AStolenWriterTokenNamesNoPrefixOutsideTheLengthBounds(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0"}}})
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home"})
	// Control: an address outside every prefix home names is refused.
	if err := s.annotate("default", "web", map[string]any{"lbipam.cilium.io/ips": "2a00:1450::1"}); !denied(err) {
		t.Fatalf("control: 2a00:1450::1 on web before the status names it: %s", errString(err))
	}
	err := s.patch(api.GVR, "", "home", `{"status":{"currentPrefix":"2000::/3","history":[`+
		`{"prefix":"2000::/3","state":"active"},{"prefix":"2001:db8:1::/64","state":"draining"},`+
		`{"prefix":"2001:db8:2::/64","state":"draining"},{"prefix":"2001:db8:3::/64","state":"expired"}]}}`, "status")
	if !denied(err) {
		t.Errorf("2000::/3 (a /3: the writer adopts only a /64 here) made current: %s", errString(err))
	}
	// The policy reads its params from an informer: 10 s to see the status.
	for range 100 {
		if err = s.annotate("default", "web", map[string]any{"lbipam.cilium.io/ips": "2a00:1450::1"}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := s.read(t, serviceGVR, "default", "web").GetAnnotations()["lbipam.cilium.io/ips"]; got == "2a00:1450::1" {
		t.Errorf("the Service following home got 2a00:1450::1, an address no prefix the writer could adopt holds")
	} else {
		t.Logf("2a00:1450::1 refused: %s", errString(err))
	}
}

// Red team r3 (issue 42, a stolen writer token stalls the writer):
// renumber-writer-status freezes a draining entry's deprecatedAt - equal as
// a timestamp to the old one. The token may write any deprecatedAt where an
// entry starts draining (it was current), fractional seconds included; the
// writer reads it (metav1.Time keeps the fraction) and writes it back
// through metav1.Time, which serialises whole seconds: a second earlier than
// what it read, so every status write the writer makes - a condition, a real
// renumbering (named in the status before any object gets it) - is refused
// for as long as that prefix drains, after the token is revoked too.
// Two writes: make the draining 2001:db8:2::/64 current, then the real
// current prefix 2001:db8:1::/64 current again with 2001:db8:2::/64
// draining, deprecated at 2026-11-29T00:00:00.5Z.
func TestRT3AFractionalDeprecatedAtDoesNotStallTheWriter(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0"}}})
	// Each drain the token starts; the writer writes each back as it
	// reads it: the fraction cut off, the year-1 time (metav1.Time's
	// zero) left out.
	for _, drain := range []string{
		`"deprecatedAt":"2026-11-29T00:00:00.5Z"`,
		`"deprecatedAt":"2026-11-29T00:00:00Z","expiresAt":"0001-01-01T00:00:00Z"`,
	} {
		t.Run(drain, func(t *testing.T) {
			for _, body := range []string{
				`{"status":{"currentPrefix":"2001:db8:2::/64","history":[{"prefix":"2001:db8:2::/64","state":"active"},` +
					`{"prefix":"2001:db8:1::/64","state":"draining","deprecatedAt":"2026-11-29T00:00:00Z"},{"prefix":"2001:db8:3::/64","state":"expired"}]}}`,
				`{"status":{"currentPrefix":"2001:db8:1::/64","history":[{"prefix":"2001:db8:1::/64","state":"active"},` +
					`{"prefix":"2001:db8:2::/64","state":"draining",` + drain + `},{"prefix":"2001:db8:3::/64","state":"expired"}]}}`,
			} {
				if err := s.patch(api.GVR, "", "home", body, "status"); err != nil {
					t.Fatalf("the token's write refused (the stall needs it): %v", err)
				}
			}
			// The writer's next status write, made as apply.Status makes
			// it: the status read into api.Status, one condition changed,
			// the whole status sent back (api.StatusPatch).
			dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
			if err != nil {
				t.Fatal(err)
			}
			live := dp.Status
			st := live
			st.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Synced", Message: "synced",
				LastTransitionTime: metav1.NewTime(time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC))}}
			patch, err := api.StatusPatch(live, st)
			if err != nil {
				t.Fatal(err)
			}
			body, err := json.Marshal(map[string]any{"status": patch})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the writer's write: %s", body)
			if err := s.patch(api.GVR, "", "home", string(body), "status"); err != nil {
				t.Errorf("the writer's own status write, the history as it read it, refused: %v", err)
			}
		})
	}
}
