// Package manifests_test checks the shipped monitoring rules: their promtool
// unit tests pass, and the PrometheusRule carries exactly the rules file's groups.
package manifests_test

import (
	"os"
	"os/exec"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool missing in CI: `make deps` installs Debian's prometheus package")
		}
		t.Skip("promtool not installed (make deps)")
	}
	cmd := exec.Command(promtool, "test", "rules", "rules_test.yaml")
	cmd.Dir = "monitoring"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	var plain struct {
		Groups any `json:"groups"`
	}
	var pr struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups any `json:"groups"`
		} `json:"spec"`
	}
	read(t, "monitoring/rules.yaml", &plain)
	read(t, "monitoring/prometheusrule.yaml", &pr)
	if pr.Kind != "PrometheusRule" || plain.Groups == nil || !reflect.DeepEqual(plain.Groups, pr.Spec.Groups) {
		t.Error("monitoring/prometheusrule.yaml and monitoring/rules.yaml disagree: keep their groups identical")
	}
}

func read(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
