package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"
)

// homeStatus is the status stealWriterToken leaves on home.
const homeStatus = `{"status":{"currentPrefix":"2001:db8:1::/64","history":[` +
	`{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"draining"},` +
	`{"prefix":"2001:db8:3::/64","state":"expired"}]}}`

// TestAStolenWriterTokenNamesNoPrefixOutsideTheLengthBounds (issue 42, a
// stolen writer token): renumber-writer-status holds a prefix made current
// to the length bounds the writer adopts by (model.lengthBounds), the
// acquisition's where prefixFilter sets none - not 0 to 128, with which the
// token named 2000::/3 current and the value policy, which trusts the
// status, then admitted any global address on any Service following home
// (found by the third red team). For each spec, a prefix of each length
// made current is admitted exactly when the writer's model accepts it (with
// dns, when it also has dns.prefixLength: the only length the writer forms
// there).
func TestAStolenWriterTokenNamesNoPrefixOutsideTheLengthBounds(t *testing.T) {
	ra := map[string]any{"interface": "eth0"}
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{"routerAdvertisement": ra}})
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
	}

	pd := map[string]any{"interface": "eth1"}
	filter := func(f map[string]any) map[string]any { return map[string]any{"prefixFilter": f} }
	with := func(a, b map[string]any) map[string]any {
		out := map[string]any{}
		for _, m := range []map[string]any{a, b} {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		acquisition map[string]any
	}{
		{"ra", map[string]any{"routerAdvertisement": ra}},
		{"dhcpv6pd", map[string]any{"dhcpv6pd": pd}},
		{"ra and dhcpv6pd", map[string]any{"routerAdvertisement": ra, "dhcpv6pd": pd}},
		{"dns /56", map[string]any{"dns": map[string]any{"name": "home.example.org", "prefixLength": 56}}},
		{"dns /48, min 40", with(map[string]any{"dns": map[string]any{"name": "home.example.org", "prefixLength": 48}}, filter(map[string]any{"minPrefixLength": 40}))},
		{"dns /48, min 52", with(map[string]any{"dns": map[string]any{"name": "home.example.org", "prefixLength": 48}}, filter(map[string]any{"minPrefixLength": 52}))},
		{"dns /56, max 48", with(map[string]any{"dns": map[string]any{"name": "home.example.org", "prefixLength": 56}}, filter(map[string]any{"maxPrefixLength": 48}))},
		{"ra, max 56", with(map[string]any{"routerAdvertisement": ra}, filter(map[string]any{"maxPrefixLength": 56}))},
		{"ra, min 48", with(map[string]any{"routerAdvertisement": ra}, filter(map[string]any{"minPrefixLength": 48}))},
		{"dhcpv6pd, min 60", with(map[string]any{"dhcpv6pd": pd}, filter(map[string]any{"minPrefixLength": 60}))},
		{"dhcpv6pd, max 52", with(map[string]any{"dhcpv6pd": pd}, filter(map[string]any{"maxPrefixLength": 52}))},
		{"ra, 16 to 128", with(map[string]any{"routerAdvertisement": ra}, filter(map[string]any{"minPrefixLength": 16, "maxPrefixLength": 128}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := map[string]any{"acquisition": tc.acquisition}
			setSpec(t, s, spec)
			m := parsedModel(t, spec)
			base := netip.MustParseAddr("2001:db8:1234:5678:9abc:def0:1234:5678")
			for _, bits := range []int{3, 16, 40, 47, 48, 52, 56, 60, 63, 64, 65, 128} {
				p := netip.PrefixFrom(base, bits).Masked()
				want := m.Accept(p) == "" && (m.DNS == nil || bits == m.DNS.Length)
				if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(t.Context(), "home", types.MergePatchType, []byte(homeStatus), metav1.PatchOptions{}, "status"); err != nil {
					t.Fatal(err)
				}
				err := s.patch(api.GVR, "", "home", fmt.Sprintf(`{"status":{"currentPrefix":%q,"history":[`+
					`{"prefix":%q,"state":"active"},{"prefix":"2001:db8:1::/64","state":"draining"},`+
					`{"prefix":"2001:db8:2::/64","state":"draining"},{"prefix":"2001:db8:3::/64","state":"expired"}]}}`, p, p), "status")
				if got := err == nil; got != want || !got && !denied(err) {
					t.Errorf("%s made current: admitted %v, want %v (the model: %q): %s", p, got, want, m.Accept(p), errString(err))
				}
			}
		})
	}
}

// setSpec replaces home's spec, as the user.
func setSpec(t *testing.T, s stolen, spec map[string]any) {
	t.Helper()
	u := s.read(t, api.GVR, "", "home")
	u.Object["spec"] = spec
	if _, err := s.w.API.Dynamic.Resource(api.GVR).Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// parsedModel is spec as the writer reads it.
func parsedModel(t *testing.T, spec map[string]any) model.Model {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var s dynamicprefix.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return model.Parse("home", s)
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
