package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed chart README is what chartdoc writes from the chart's files
// (run `make chart-readme` after changing a value), and every value has a
// description.
func TestTheChartREADMEIsGenerated(t *testing.T) {
	chart := filepath.Join("..", "..", "charts", "renumber")
	want, err := render(chart)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("charts/renumber/README.md is not what tools/chartdoc writes: run make chart-readme")
	}
	for _, key := range []string{"`agent.interface`", "`writer.budget.decisionBurst`", "`crds.keep`", "`monitoring.dashboard.labels`"} {
		if !strings.Contains(string(want), "| "+key+" |") {
			t.Errorf("the table lacks %s", key)
		}
	}
}
