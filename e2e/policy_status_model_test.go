package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
)

// TestNoStatusAStolenWriterTokenLeavesStopsTheWriter plays a stolen writer
// token against renumber-writer-status on the real API server: seeded
// random status writes, each the status as it is with one to three changes
// - a renumbering (in any text), a time rewritten in any form the API
// server's date-time format may admit (fractions, offsets, lower case,
// years 0, 1 and 9999, before 1970), a prefix rewritten in another text, an
// entry dropped, expired, duplicated or given another delegation, a
// condition's time, the current prefix renamed with an active entry of its
// own acquired when the token likes. Whatever the API server answered, the writer then makes
// its pass as the controller does - decode, decide (the router advertising
// one of four prefixes, or none), render, apply.Status's patch - and the
// property is checked: it reads the DynamicPrefix, and its status write is
// admitted. A fixed seed, not a Go fuzz target: it needs a world.
func TestNoStatusAStolenWriterTokenLeavesStopsTheWriter(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0", "delegatedPrefixLength": 56}}})
	g := statusGen{rand.New(rand.NewPCG(42, 2))}
	const steps = 200
	var admitted, written int
	now := passTime
	for step := range steps {
		before := s.read(t, api.GVR, "", "home").Object["status"].(map[string]any)
		var err error
		bodies := g.write(before, now)
		for _, b := range bodies {
			err = s.patch(api.GVR, "", "home", b, "status")
		}
		if err == nil {
			admitted++
		}
		body := strings.Join(bodies, " then ")
		var reports []decide.Report
		if p := []string{"2001:db8:1::/64", "2001:db8:2::/64", "2001:db8:4::/64", ""}[g.IntN(4)]; p != "" {
			reports = append(reports, advertising(netip.MustParsePrefix(p)))
		}
		what := fmt.Sprintf("step %d (the token's write %s)", step, trim(body))
		_, wrote, err := s.writerPass(t, what, reports, now)
		now = now.Add(time.Duration(g.IntN(7200)) * time.Second)
		if !wrote {
			continue
		}
		written++
		if err != nil {
			t.Errorf("%s: the writer's status write refused: %v", what, err)
		}
	}
	t.Logf("%d token writes, %d admitted; %d writer writes", steps, admitted, written)
}

// statusGen makes the stolen token's status writes.
type statusGen struct{ *rand.Rand }

// prefixText is prefix n (2001:db8:n::/64) in one of the texts an API
// server stores as written.
func (g statusGen) prefixText(n int) string {
	f := []string{"2001:db8:%x::/64", "2001:DB8:%X::/64", "2001:db8:%x:0::/64", "2001:0db8:%04x::/64", "2001:db8:%x::1/64"}
	return fmt.Sprintf(f[g.IntN(len(f))], n)
}

// number is n of a prefix text 2001:db8:n::/64 (a random one if it is not).
func (g statusGen) number(p string) int {
	q, err := netip.ParsePrefix(p)
	if err != nil {
		return 1 + g.IntN(4)
	}
	a := q.Addr().As16()
	return int(a[4])<<8 | int(a[5])
}

// time is t, or a time near it, in a form the CRD's date-time format may
// admit: half the time the writer's own.
func (g statusGen) time(t time.Time) string {
	switch g.IntN(24) {
	case 0:
		return t.Format("2006-01-02T15:04:05.5Z")
	case 1:
		return t.Format("2006-01-02T15:04:05.999999999Z")
	case 2:
		return t.In(time.FixedZone("", 3600)).Format(time.RFC3339)
	case 3:
		return strings.ToLower(t.Format(time.RFC3339))
	case 4:
		return t.Format("2006-01-02T15:04:05,5Z")
	case 5:
		return t.Format("2006-01-02T15:04:05") + "+99:99"
	case 6:
		return "0001-01-01T00:00:00Z"
	case 7:
		return "0001-01-01T00:00:00.5Z"
	case 8:
		return "0001-01-01T00:30:00+01:00"
	case 9:
		return "1969-12-31T23:59:59.5Z"
	case 10:
		return "9999-12-31T23:59:59.999Z"
	case 11:
		return "0000-06-01T00:00:00Z"
	}
	return t.UTC().Format(time.RFC3339)
}

// write is the token's status write: st with one to three changes (and,
// before it, st without its active entries where a change renames the
// current prefix: renumber-writer-status keeps the current entry's
// acquiredAt, but the existing operator writes no entry).
func (g statusGen) write(st map[string]any, now time.Time) []string {
	var bodies []string
	var history []any
	if h, ok := st["history"].([]any); ok {
		history = slices.Clone(h)
	}
	next := map[string]any{}
	for k, v := range st {
		next[k] = v
	}
	entry := func() map[string]any {
		if len(history) == 0 {
			return nil
		}
		i := g.IntN(len(history))
		e := map[string]any{}
		for k, v := range history[i].(map[string]any) {
			e[k] = v
		}
		history[i] = e
		return e
	}
	for range 1 + g.IntN(3) {
		switch g.IntN(9) {
		case 0: // a renumbering
			p := g.prefixText(1 + g.IntN(4))
			for i, h := range history {
				if e := h.(map[string]any); e["state"] == model.StateActive {
					d := map[string]any{}
					for k, v := range e {
						d[k] = v
					}
					d["state"], d["deprecatedAt"] = model.StateDraining, g.time(now)
					if g.IntN(2) == 0 {
						d["expiresAt"] = g.time(now.Add(time.Hour))
					}
					history[i] = d
				}
			}
			next["currentPrefix"] = p
			if g.IntN(4) > 0 {
				history = append([]any{map[string]any{"prefix": p, "state": model.StateActive, "acquiredAt": g.time(now)}}, history...)
			}
		case 1, 2: // a time
			if e := entry(); e != nil {
				k := []string{"acquiredAt", "deprecatedAt", "expiresAt"}[g.IntN(3)]
				e[k] = g.time(now.Add(time.Duration(g.IntN(7200)-3600) * time.Second))
			}
		case 3: // a prefix's text
			if e := entry(); e != nil {
				if p, ok := e["prefix"].(string); ok {
					e["prefix"] = g.prefixText(g.number(p))
				}
			}
		case 4: // an entry dropped, expired or duplicated
			if len(history) > 0 {
				i := g.IntN(len(history))
				switch g.IntN(3) {
				case 0:
					history = slices.Delete(history, i, i+1)
				case 1:
					entry()["state"] = model.StateExpired
				default:
					history = append(history, history[i])
				}
			}
		case 5: // a delegation
			if e := entry(); e != nil {
				e["delegatedPrefix"] = []string{"2001:db8:1::/56", "2001:db8::/56", "2001:db8:2::/56", "2001:DB8:2::/56"}[g.IntN(4)]
			}
		case 6: // a condition's time
			next["conditions"] = []any{map[string]any{"type": "Ready", "status": "True", "reason": "Synced", "message": "synced",
				"lastTransitionTime": g.time(now)}}
		case 7: // the current prefix's text, its entry left as it is
			if p, ok := st["currentPrefix"].(string); ok {
				next["currentPrefix"] = g.prefixText(g.number(p))
			}
		case 8: // the current prefix's text, with an active entry of its own in that text acquired when the token likes (red team r7b)
			if p, ok := st["currentPrefix"].(string); ok {
				q := g.prefixText(g.number(p))
				next["currentPrefix"] = q
				history = slices.DeleteFunc(history, func(h any) bool { return h.(map[string]any)["state"] == model.StateActive })
				if bodies == nil {
					drop, _ := json.Marshal(map[string]any{"status": map[string]any{"history": history}})
					bodies = append(bodies, string(drop))
				}
				history = append([]any{map[string]any{"prefix": q, "state": model.StateActive,
					"acquiredAt": g.time(now.Add(time.Duration(g.IntN(7200)-3600) * time.Second))}}, history...)
			}
		}
	}
	next["history"] = history
	body, _ := json.Marshal(map[string]any{"status": next})
	return append(bodies, string(body))
}
