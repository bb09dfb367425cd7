package backends

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/renumber/renumber/internal/writer/model"
)

// TestWhatTheWriterCreatesIsTheShapeItsPolicyAdmits: renumber-writer-owned
// (manifests/writer/policy.yaml) admits, from the writer's token, only the
// one shape of sibling IPPool and of BGP advertisement the writer renders
// (issue 42: a stolen token creates nothing else). The world tests prove the
// policy refuses the rest (e2e TestAStolenWriterTokensOwnObjectsAndStatus-
// MoveNoAddress) and admits these (TestCalicoIPPools, TestBGPAdvertisement-
// Lifecycle); this one keeps the renderers and the policy's lists in step,
// so a label added to one is added to the other.
func TestWhatTheWriterCreatesIsTheShapeItsPolicyAdmits(t *testing.T) {
	owned := ownedPolicy(t)
	// A phrase of each validation that checks a shape.
	const siblingRule, advertRule = "'dynamic-prefix.io/sibling-of']) &&", "'dynamic-prefix.io/subnet', 'advertise']) &&"
	sibling := RenderCalico(parent(), "home", []string{"2001:db8:2::/64", "2001:db8:1::/64"}).Siblings[0]
	advert, err := RenderAdvertisement("home", model.Subnet{Name: "public", Advertise: true, Community: "65000:100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		rule   string
	}{
		{"a sibling IPPool", sibling.Labels, siblingRule},
		{"a BGP advertisement", advert.Labels, advertRule},
	} {
		r := rule(t, owned, c.rule)
		for k := range c.labels {
			if !strings.Contains(r, "'"+k+"'") {
				t.Errorf("%s is labelled %s, which renumber-writer-owned does not admit on it", c.name, k)
			}
		}
	}
	if sibling.Spec["disabled"] != true || !strings.Contains(rule(t, owned, siblingRule), "object.spec.?disabled.orValue(false) == true") {
		t.Errorf("a sibling is rendered disabled %v; the policy must require what the writer renders", sibling.Spec["disabled"])
	}
	if !strings.HasPrefix(sibling.Name, sibling.Labels[LabelSiblingOf]+"-") {
		t.Errorf("sibling %s is not named after the pool it copies, %s", sibling.Name, sibling.Labels[LabelSiblingOf])
	}
	// The community it renders is the DynamicPrefix's bgp.community verbatim:
	// the policy admits the form the CRD admits, no other.
	crd, err := os.ReadFile(filepath.Join("..", "..", "..", "manifests", "crds", "dynamicprefixes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pattern := regexp.MustCompile(`(?m)^\s+community:\n\s+type: string\n\s+pattern: '([^']+)'`).FindSubmatch(crd)
	if pattern == nil {
		t.Fatal("no pattern for bgp.community in manifests/crds/dynamicprefixes.yaml")
	}
	if want := "c.matches('" + string(pattern[1]) + "')"; !strings.Contains(rule(t, owned, "'LoadBalancerIP'"), want) {
		t.Errorf("renumber-writer-owned does not hold a community to the CRD's pattern, %s", want)
	}
	ads := advert.Spec["advertisements"].([]any)
	a := ads[0].(map[string]any)
	if len(ads) != 1 || a["advertisementType"] != "Service" || !slices.Equal(a["service"].(map[string]any)["addresses"].([]any), []any{"LoadBalancerIP"}) {
		t.Errorf("the advertisement is rendered %v; the policy admits one Service advertisement of LoadBalancer IPs", advert.Spec)
	}
}

// ownedPolicy reads the validations of renumber-writer-owned.
func ownedPolicy(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "manifests", "writer", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var d struct {
			Metadata struct{ Name string }
			Spec     struct{ Validations []struct{ Expression string } }
		}
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if d.Metadata.Name != "renumber-writer-owned" || len(d.Spec.Validations) == 0 {
			continue
		}
		var out []string
		for _, v := range d.Spec.Validations {
			out = append(out, v.Expression)
		}
		return out
	}
	t.Fatal("no ValidatingAdmissionPolicy renumber-writer-owned in manifests/writer/policy.yaml")
	return nil
}

// rule is the one expression that holds phrase.
func rule(t *testing.T, exprs []string, phrase string) string {
	t.Helper()
	var found []string
	for _, e := range exprs {
		if strings.Contains(e, phrase) {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d validations of renumber-writer-owned hold %q, want 1", len(found), phrase)
	}
	return found[0]
}
