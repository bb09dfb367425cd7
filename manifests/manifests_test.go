// Package manifests_test checks the shipped monitoring rules: their promtool
// unit tests pass, and the PrometheusRule carries exactly the rules file's groups.
package manifests_test

import (
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
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

// Every alert waits (a for) before it fires, and its runbook_url names its
// own section of docs/runbooks.md, which exists.
func TestEveryAlertHasAForAndItsOwnRunbook(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				For         string
				Annotations map[string]string
			}
		}
	}
	read(t, "monitoring/rules.yaml", &rules)
	runbooks, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	const base = "https://github.com/renumber/renumber/blob/main/docs/runbooks.md#"
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts++
			if r.For == "" {
				t.Errorf("%s has no for", r.Alert)
			}
			if want := base + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !strings.Contains(string(runbooks), "\n## "+r.Alert+"\n") {
				t.Errorf("docs/runbooks.md has no section %q", r.Alert)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("no alerts read")
	}
}

// Every metric every dashboard panel reads is filtered by the dashboard's
// $job and $namespace, so one release's panels show that release alone.
func TestEveryDashboardQueryFollowsJobAndNamespace(t *testing.T) {
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	read(t, "monitoring/dashboard.json", &dash)
	selector := regexp.MustCompile(`\b(?:renumber|process|go)_[a-z_]+\b(\{[^}]*\})?`)
	queries := 0
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			queries++
			for _, m := range selector.FindAllStringSubmatch(q.Expr, -1) {
				if !strings.Contains(m[1], `job=~"$job"`) || !strings.Contains(m[1], `namespace=~"$namespace"`) {
					t.Errorf("%s: %s is not filtered by $job and $namespace", p.Title, m[0])
				}
			}
		}
	}
	if queries == 0 {
		t.Fatal("no queries read")
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

// crd is the part of a CustomResourceDefinition the tests read: each
// version's schema.
type crd struct {
	Spec struct {
		Versions []struct {
			Name   string
			Schema struct {
				OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
			}
		}
	}
}

// dynamicPrefixCRD reads the DynamicPrefix CRD (the chart's copy is kept
// equal to it: tools/chartfiles).
func dynamicPrefixCRD(t *testing.T) crd {
	t.Helper()
	var c crd
	read(t, "crds/dynamicprefixes.yaml", &c)
	return c
}

// Every field of the DynamicPrefix CRD has a description, so `kubectl
// explain dynamicprefix.spec...` answers for each, as the CRD it replaces did
// (but metadata, which the API server describes itself and lets no CRD
// describe).
func TestEveryCRDFieldIsDescribed(t *testing.T) {
	crd := dynamicPrefixCRD(t)
	var nodes int
	var walk func(path string, n map[string]any)
	walk = func(path string, n map[string]any) {
		nodes++
		if d, _ := n["description"].(string); d == "" && !strings.HasSuffix(path, ".metadata") {
			t.Errorf("%s has no description", path)
		}
		if props, ok := n["properties"].(map[string]any); ok {
			for k, v := range props {
				walk(path+"."+k, v.(map[string]any))
			}
		}
		if items, ok := n["items"].(map[string]any); ok {
			walk(path+"[]", items)
		}
	}
	for _, v := range crd.Spec.Versions {
		walk(v.Name, v.Schema.OpenAPIV3Schema)
	}
	if nodes < 70 {
		t.Errorf("walked %d schema nodes: the CRD was not read whole", nodes)
	}
}
