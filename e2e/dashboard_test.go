package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/renumber/renumber/tools/world"
)

// scrape is what a set of /metrics pages expose: each family, and the label
// names seen on its samples.
type scrape map[string]map[string]bool

func (s scrape) add(body []byte) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			names := []string{name}
			if typ == "histogram" { // queried by its series' names
				names = []string{name + "_bucket", name + "_sum", name + "_count"}
			}
			for _, n := range names {
				if s[n] == nil {
					s[n] = map[string]bool{}
				}
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, _ := strings.Cut(line, "{")
		if s[name] == nil {
			continue
		}
		for _, kv := range strings.Split(strings.Split(labels, "}")[0], ",") {
			if k, _, ok := strings.Cut(kv, "="); ok {
				s[name][k] = true
			}
		}
	}
}

var (
	metricName = regexp.MustCompile(`\b(?:renumber|process|go)_[a-z_]+\b`)
	byClause   = regexp.MustCompile(`\bby \(([a-z_, ]+)\)`)
)

// TestDashboardQueriesRealMetrics: every metric manifests/monitoring/dashboard.json
// queries is exposed by a real agent, leader or shadow writer, and every label
// it groups by is on the metric's samples wherever the world produced some.
func TestDashboardQueriesRealMetrics(t *testing.T) {
	dash := readDashboard(t)

	w := homeWorld(t, 1)
	startAgent(t, w, "node1")
	leader, shadow := freeAddr(t), ""
	startWriter(t, w, "writer-a", "--metrics-addr", leader)
	poolIs(t, w, "pool follows A", prefixA.String())
	shadow = startShadow(t, w, "shadow")
	planIs(t, shadow, "shadow agrees")

	got := scrape{}
	for _, addr := range []string{leader, shadow} {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got.add(body)
	}
	nd, err := w.Net.Node("node1")
	if err != nil {
		t.Fatal(err)
	}
	body, err := nd.Get("http://[::1]:9470/metrics")
	if err != nil {
		t.Fatal(err)
	}
	got.add(body)

	queries, labelled := 0, 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			queries++
			names := metricName.FindAllString(target.Expr, -1)
			if len(names) == 0 {
				t.Errorf("%s: %q queries no metric", p.Title, target.Expr)
			}
			for _, n := range names {
				if got[n] == nil {
					t.Errorf("%s: %s is not exposed by any renumber process", p.Title, n)
				}
			}
			for _, m := range byClause.FindAllStringSubmatch(target.Expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					l = strings.TrimSpace(l)
					if l == "instance" || l == "job" {
						continue // the scraper adds these
					}
					seen, sampled := false, false
					for _, n := range names {
						if len(got[n]) > 0 {
							sampled = true
						}
						seen = seen || got[n][l]
					}
					if sampled {
						labelled++
						if !seen {
							t.Errorf("%s: %q groups by %q, which no sample of %v carries", p.Title, target.Expr, l, names)
						}
					}
				}
			}
		}
	}
	if queries == 0 || labelled == 0 {
		t.Errorf("%d queries, %d label groupings checked: the dashboard was not read", queries, labelled)
	}
}

// dashboard is what the tests read of manifests/monitoring/dashboard.json.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(repo, "manifests", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	return dash
}
