package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// reporting is node a's digest: the router advertises cur on eth0, and each of
// deprecated deprecated with an hour left (the router re-sending it so).
func reporting(cur netip.Prefix, deprecated ...netip.Prefix) []decide.Report {
	l := digest.Link{Name: "eth0", Prefixes: []digest.Prefix{{Prefix: cur, Sources: digest.SourceRA}}}
	for _, d := range deprecated {
		l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: d, Deprecated: true, Remaining: time.Hour, Sources: digest.SourceRA})
	}
	return []decide.Report{{Node: "a", Digest: digest.Node{Links: []digest.Link{l}}}}
}

// TestATokensTimesInTheHistoryMoveNoAddress: renumber-writer-status admits
// any time in the writer's form (years 0001-9999) where the status lets a
// time be chosen: the new current entry's acquiredAt and the replaced
// entry's deprecatedAt and expiresAt at a renumbering - the token's own,
// which the writer then undoes, or the router's, written before the
// writer's (CEL reads no clock, and the token may stamp a renumbering at
// any time the writer might). What follows, pass by pass through a
// renumbering and the end of its drain, beside a shadow writer fed the same
// reports that no token touched:
//   - an acquiredAt in year 9999 (or year 1) moves nothing pooled: the
//     writer stamps a transition no earlier than the entry it replaces was
//     acquired (so that its own write is admitted), so the year 9999 is
//     written again at every later renumbering - in the status only, where
//     a drain is ordered by its place in the history (as the writer writes
//     it) and ends at its expiresAt, which is now plus what the nodes
//     report left, whatever deprecatedAt says;
//   - an expiresAt in year 9999 on the router's renumbering, written before
//     the writer's, keeps the replaced prefix pooled only while the nodes
//     still report it (the router re-sending it deprecated), never once
//     they stop: a drain's deadline where nodes vote is theirs too
//     (TestAForgedDrainDeadlineEndsWithTheNodesReports).
//
// Every status write of the writer's is admitted.
func TestATokensTimesInTheHistoryMoveNoAddress(t *testing.T) {
	s := stealWriterToken(t, nil)
	admin := s.w.API.Dynamic.Resource(api.GVR)
	a, b, c := homePrefix, netip.MustParsePrefix("2001:db8:2::/64"), renumberedPrefix
	t0 := passTime
	// The writer's first pass: a stamped acquired at t0, b and the rest
	// expired (no node reports them).
	if _, _, err := s.writerPass(t, "the first pass", reporting(a), t0); err != nil {
		t.Fatal(err)
	}
	base := s.read(t, api.GVR, "", "home")
	dp0, err := api.FromUnstructured(base)
	if err != nil {
		t.Fatal(err)
	}
	baseStatus, err := json.Marshal(map[string]any{"status": base.Object["status"]})
	if err != nil {
		t.Fatal(err)
	}
	m := model.Parse("home", dp0.Spec)
	const year9999, year1 = "9999-12-31T23:59:59Z", "0001-01-01T00:00:01Z"
	acquiredA := t0.UTC().Format(time.RFC3339)
	steps := []struct {
		what    string
		at      time.Duration
		reports []decide.Report
	}{
		{"the router still on a", time.Minute, reporting(a)},
		{"the router renumbers to c", 2 * time.Minute, reporting(c, a)},
		{"half-way through a's hour", 32 * time.Minute, reporting(c, a)},
		{"past a's hour, the router still re-sending it deprecated", 62*time.Minute + time.Second, reporting(c, a)},
		{"the router stopped sending a", 3 * time.Hour, reporting(c)},
	}
	for _, tc := range []struct {
		name string
		// before: the step the token writes before; forge: its status.
		before int
		forge  string
		// exact: the writer pools what the shadow pools at every step;
		// else what the nodes report at that step beside it.
		exact bool
	}{
		{name: "acquiredAt in year 9999, by the token's own renumbering to b", before: 0, exact: true, forge: `{"status":{"currentPrefix":"` + b.String() + `","history":[` +
			`{"prefix":"` + b.String() + `","state":"active","acquiredAt":"` + year9999 + `"},` +
			`{"prefix":"` + a.String() + `","state":"draining","acquiredAt":"` + acquiredA + `","deprecatedAt":"` + year9999 + `","expiresAt":"` + year9999 + `"}]}}`},
		// a's drain would have to start in year 1 too, before a was
		// acquired (refused): the token leaves a out.
		{name: "acquiredAt in year 1, by the token's own renumbering to b", before: 0, exact: true, forge: `{"status":{"currentPrefix":"` + b.String() + `","history":[` +
			`{"prefix":"` + b.String() + `","state":"active","acquiredAt":"` + year1 + `"}]}}`},
		{name: "expiresAt and acquiredAt in year 9999 on the router's renumbering, before the writer's", before: 1, forge: `{"status":{"currentPrefix":"` + c.String() + `","history":[` +
			`{"prefix":"` + c.String() + `","state":"active","acquiredAt":"` + year9999 + `"},` +
			`{"prefix":"` + a.String() + `","state":"draining","acquiredAt":"` + acquiredA + `","deprecatedAt":"` + year9999 + `","expiresAt":"` + year9999 + `"}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := admin.Patch(t.Context(), "home", types.MergePatchType, baseStatus, metav1.PatchOptions{}, "status"); err != nil {
				t.Fatal(err)
			}
			shadow := *dp0
			for i, step := range steps {
				now := t0.Add(step.at)
				if i == tc.before {
					if err := s.patch(api.GVR, "", "home", tc.forge, "status"); err != nil {
						t.Fatalf("the token's status (the property is then the policy's): %v", err)
					}
				}
				st, _, err := s.writerPass(t, step.what, step.reports, now)
				if err != nil {
					t.Fatalf("%s: the writer's status write refused: %v", step.what, err)
				}
				shadow.Status = render.Status(&shadow, m, decide.For(m, render.Prior(shadow.Status), step.reports, now), render.Problems{}, now)
				got, want := pooled(st), pooled(shadow.Status)
				reported := slices.Clone(want)
				for _, p := range step.reports[0].Digest.Links[0].Prefixes {
					reported = append(reported, p.Prefix)
				}
				switch {
				case len(got) == 0 || got[0] != want[0]:
					t.Errorf("%s: current %v, the shadow's %v", step.what, got, want)
				case tc.exact && !slices.Equal(got, want):
					t.Errorf("%s: pooled %v, the shadow writer %v", step.what, got, want)
				case slices.ContainsFunc(got, func(p netip.Prefix) bool { return !slices.Contains(reported, p) }):
					t.Errorf("%s: pooled %v, beyond the shadow's %v and what the nodes report", step.what, got, want)
				}
				t.Logf("%s: pooled %v (the shadow %v); history %s", step.what, got, want, histories(st))
			}
		})
	}
}

// pooled is the current prefix, then every other prefix st pools.
func pooled(st api.Status) []netip.Prefix {
	return decide.Pooled(render.Prior(st).History)
}

func histories(st api.Status) string {
	out := ""
	for _, h := range st.History {
		out += fmt.Sprintf(" %s %s acq=%v dep=%v exp=%v;", h.Prefix, h.State, h.AcquiredAt, h.DeprecatedAt, h.ExpiresAt)
	}
	return out
}
