package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
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
	// Both renumberings below are in the writer's shape (the replaced entry's
	// deprecatedAt is the new one's acquiredAt), so that only the length can
	// refuse them.
	err := s.patch(api.GVR, "", "home", `{"status":{"currentPrefix":"2000::/3","history":[`+
		`{"prefix":"2000::/3","state":"active","acquiredAt":"2026-11-29T00:00:00Z"},`+
		`{"prefix":"2001:db8:1::/64","state":"draining","deprecatedAt":"2026-11-29T00:00:00Z"},`+
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
					`{"prefix":%q,"state":"active","acquiredAt":"2026-11-29T00:00:00Z"},`+
					`{"prefix":"2001:db8:1::/64","state":"draining","deprecatedAt":"2026-11-29T00:00:00Z"},`+
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

// TestTheWritersStatusWriteIsAdmittedWhateverTheStatusHolds (issue 42, a
// stolen writer token stalls the writer): renumber-writer-status compares a
// draining entry's times old against new, and the writer writes back what
// it read through metav1.Time - to the second, in UTC, its zero (year 1)
// left out. Compared exactly, a token that started a drain with
// deprecatedAt ...00.5Z, or expiresAt 0001-01-01T00:00:00Z, had every later
// status write of the writer refused - a condition, a real renumbering
// (named in the status before any object gets it) - for as long as the
// prefix drained, after the token was revoked too (found by the third red
// team). And the CRD's date-time format admits times metav1.Time cannot
// read at all (2026-11-29t00:00:00z), with which the writer could not read
// the DynamicPrefix again.
//
// Each time below is left on a draining entry (2001:db8:2::/64, drained by
// two writes: made current, then replaced by 2001:db8:1::/64 again) by the
// token - whose writes may be refused, leaving nothing - and, where a user
// may write it, by the user (unchecked); and the current prefix in text
// other than the writer's (which writes it as netip does, and gives it an
// entry in that text when it has none). Whatever is left, the writer reads
// the DynamicPrefix, and its next passes' status writes (decide and render
// on what it read, the router still advertising 2001:db8:1::/64, then
// renumbering to 2001:db8:4::/64) are admitted.
func TestTheWritersStatusWriteIsAdmittedWhateverTheStatusHolds(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0"}}})
	for _, tc := range []struct {
		drain string
		user  bool // a user may leave it: the writer carries on
		// current: the current prefix as the token writes it back, its
		// active entry left out ("": 2001:db8:1::/64, with its entry).
		current string
	}{
		{drain: `"deprecatedAt":"2026-11-29T00:00:00Z","expiresAt":"2026-11-29T06:00:00Z"`, user: true},
		{drain: `"deprecatedAt":"2026-11-29T00:00:00.5Z"`, user: true},
		{drain: `"deprecatedAt":"2026-11-29T00:00:00.999999999Z","expiresAt":"2026-11-29T06:00:00.5Z"`, user: true},
		{drain: `"deprecatedAt":"2026-11-29T00:00:00Z","expiresAt":"0001-01-01T00:00:00Z"`, user: true},
		{drain: `"deprecatedAt":"0001-01-01T00:00:00Z","expiresAt":"0001-01-01T00:00:00.5Z"`, user: true},
		{drain: `"deprecatedAt":"1969-12-31T23:59:59.5Z","expiresAt":"1970-01-01T00:00:00.5Z"`, user: true},
		{drain: `"deprecatedAt":"2026-11-29T01:00:00+01:00","expiresAt":"2026-11-29T05:30:00-00:30"`, user: true},
		{drain: `"deprecatedAt":"2026-11-29T00:00:00,5Z"`, user: true},
		{drain: `"deprecatedAt":"2026-11-29t00:00:00z"`},
		{drain: `"deprecatedAt":"2026-11-29T00:00:00x5Z"`},
		{drain: `"deprecatedAt":"2026-11-29T00:00:00Z","expiresAt":"2026-11-29T00:00:00+99:99"`},
		{drain: `"deprecatedAt":"0001-01-01T00:30:00+01:00"`},
		{drain: `"deprecatedAt":"2026-11-29T00:00:00Z","expiresAt":"0000-06-01T00:00:00Z"`},
		{drain: `"deprecatedAt":"2026-11-29T00:00:00Z","acquiredAt":"2026-11-28t00:00:00z"`},
		{drain: `"deprecatedAt":"2026-11-29T00:00:00Z"`, current: "2001:DB8:1::/64", user: true},
		{drain: `"deprecatedAt":"2026-11-29T00:00:00Z"`, current: "2001:db8:1:0::/64", user: true},
	} {
		for _, by := range []string{"token", "user"} {
			if by == "user" && !tc.user {
				continue
			}
			t.Run(by+" "+tc.current+" "+tc.drain, func(t *testing.T) {
				admin := s.w.API.Dynamic.Resource(api.GVR)
				leave := func() {
					if _, err := admin.Patch(t.Context(), "home", types.MergePatchType, []byte(homeStatus), metav1.PatchOptions{}, "status"); err != nil {
						t.Fatal(err)
					}
					second := `{"status":{"currentPrefix":"2001:db8:1::/64","history":[{"prefix":"2001:db8:1::/64","state":"active"},`
					if tc.current != "" {
						second = `{"status":{"currentPrefix":"` + tc.current + `","history":[`
					}
					second += `{"prefix":"2001:db8:2::/64","state":"draining",` + tc.drain + `},{"prefix":"2001:db8:3::/64","state":"expired"}]}}`
					for _, body := range []string{
						`{"status":{"currentPrefix":"2001:db8:2::/64","history":[{"prefix":"2001:db8:2::/64","state":"active"},` +
							`{"prefix":"2001:db8:1::/64","state":"draining","deprecatedAt":"2026-11-29T00:00:00Z"},{"prefix":"2001:db8:3::/64","state":"expired"}]}}`,
						second,
					} {
						var err error
						if by == "user" {
							_, err = admin.Patch(t.Context(), "home", types.MergePatchType, []byte(body), metav1.PatchOptions{}, "status")
						} else {
							err = s.patch(api.GVR, "", "home", body, "status")
						}
						if err != nil {
							if by == "user" {
								t.Fatalf("the user's write refused: %v", err)
							}
							t.Logf("the token's write refused: %v", err)
						}
					}
				}
				// The writer's next pass, as the controller makes it
				// (decode, decide, render, apply.Status's patch), on what
				// was left: the router still advertising 2001:db8:1::/64,
				// or renumbering to 2001:db8:4::/64.
				for _, router := range []netip.Prefix{homePrefix, renumberedPrefix} {
					leave()
					dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
					if err != nil {
						t.Fatalf("the writer cannot read home: %v", err)
					}
					m := model.Parse("home", dp.Spec)
					d := decide.For(m, render.Prior(dp.Status), []decide.Report{advertising(router)}, passTime)
					if d.Current != router {
						t.Fatalf("the writer's decision: current %s, want %s", d.Current, router)
					}
					if err := s.writeStatus(t, dp.Status, render.Status(dp, m, d, render.Problems{}, passTime)); err != nil {
						t.Errorf("the writer's status write (current %s), refused: %v", router, err)
					}
				}
			})
		}
	}
}

// The writer's passes here: home's prefix, the one it renumbers to, and when.
var (
	homePrefix, renumberedPrefix = netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:4::/64")
	passTime                     = time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
)

// advertising is one node's digest: the router advertises cur on eth0, and
// 2001:db8:1::/64 and 2001:db8:2::/64 deprecated with an hour left.
func advertising(cur netip.Prefix) decide.Report {
	l := digest.Link{Name: "eth0", Prefixes: []digest.Prefix{{Prefix: cur, Sources: digest.SourceRA}}}
	for _, p := range []string{"2001:db8:1::/64", "2001:db8:2::/64"} {
		if q := netip.MustParsePrefix(p); q != cur {
			l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: q, Deprecated: true, Remaining: time.Hour, Sources: digest.SourceRA})
		}
	}
	return decide.Report{Node: "a", Digest: digest.Node{Links: []digest.Link{l}}}
}

// writeStatus writes st over live as the writer (apply.Status's patch).
func (s stolen) writeStatus(t *testing.T, live, st api.Status) error {
	t.Helper()
	patch, err := api.StatusPatch(live, st)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"status": patch})
	if err != nil {
		t.Fatal(err)
	}
	return s.patch(api.GVR, "", "home", string(body), "status")
}

// writerPass is the writer's pass over home as the controller makes it -
// decode, decide over reports at now, render, apply.Status's patch: the
// status it rendered, whether that is a write, and what the API server
// answered. what names the pass in a failure to read home.
func (s stolen) writerPass(t *testing.T, what string, reports []decide.Report, now time.Time) (api.Status, bool, error) {
	t.Helper()
	dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
	if err != nil {
		t.Fatalf("%s: the writer cannot read home: %v", what, err)
	}
	m := model.Parse("home", dp.Spec)
	st := render.Status(dp, m, decide.For(m, render.Prior(dp.Status), reports, now), render.Problems{}, now)
	if render.StatusEqual(st, dp.Status) {
		return st, false, nil // apply.Status writes nothing
	}
	return st, true, s.writeStatus(t, dp.Status, st)
}

// TestTheWritersStatusWriteIsAdmittedAfterAllowedPrefixesNarrow: the
// writer names each entry's delegation (routerAdvertisement.
// delegatedPrefixLength), and renumber-writer-status admits a delegation
// only inside allowedPrefixes. The user narrows allowedPrefixes to the
// current prefix's delegation while 2001:db8:2::/64 drains: the writer's
// next status write is admitted.
func TestTheWritersStatusWriteIsAdmittedAfterAllowedPrefixesNarrow(t *testing.T) {
	ra := map[string]any{"interface": "eth0", "delegatedPrefixLength": 56}
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{"routerAdvertisement": ra}})
	if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(t.Context(), "home", types.MergePatchType, []byte(
		`{"status":{"currentPrefix":"2001:db8:1::/64","delegatedPrefix":"2001:db8:1::/56","history":[`+
			`{"prefix":"2001:db8:1::/64","state":"active","delegatedPrefix":"2001:db8:1::/56"},`+
			`{"prefix":"2001:db8:2::/64","state":"draining","deprecatedAt":"2026-11-29T00:00:00Z","delegatedPrefix":"2001:db8:2::/56"}]}}`),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	setSpec(t, s, map[string]any{"acquisition": map[string]any{"routerAdvertisement": ra,
		"prefixFilter": map[string]any{"allowedPrefixes": []any{"2001:db8:1::/56"}}}})
	dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
	if err != nil {
		t.Fatal(err)
	}
	m := model.Parse("home", dp.Spec)
	d := decide.For(m, render.Prior(dp.Status), []decide.Report{advertising(homePrefix)}, passTime)
	st := render.Status(dp, m, d, render.Problems{}, passTime)
	if err := s.writeStatus(t, dp.Status, st); err != nil {
		t.Errorf("the writer's status write refused: %v", err)
	}
}
