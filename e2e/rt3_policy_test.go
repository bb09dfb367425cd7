package e2e

import (
	"testing"
	"time"

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
