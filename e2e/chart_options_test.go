package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/tools/world"
)

// optionsAndComponents pairs each optional part of the chart (a value) with
// its kustomize side (a component or a resource of manifests/), so that the
// two are rendered with every option on and compared object for object.
var optionsAndComponents = []struct{ values, component, resource string }{
	{values: "shadow: {enabled: true}\n", component: "shadow"},
	{values: "writer: {pdb: {enabled: true}}\n", component: "pdb"},
	{values: "kubeVIP: {configMap: kube-system/kubevip}\n", component: "kube-vip"},
	{values: "admissionPolicies: {webhookKeys: [policy.example.org/team, audit.example.org/]}\n", component: "webhook-keys"},
	{values: "monitoring: {podMonitor: {enabled: true}, prometheusRule: {enabled: true}, dashboard: {enabled: true}}\n", resource: "monitoring"},
}

// TestEveryOptionOfTheChartRendersItsManifests: the chart with every
// optional part on (the shadow, the writers' PodDisruptionBudget, kube-vip,
// the admin's webhook keys, monitoring) renders exactly the objects of manifests/ with the matching
// components and resources, field for field, as its defaults render
// manifests/ itself (TestChartRendersTheManifests) - so no object of either
// drifts from the other, whichever kind it is. The manifests are the source
// (the chart embeds them where it can: make chart-files); the templates that
// take values are held to them here.
func TestEveryOptionOfTheChartRendersItsManifests(t *testing.T) {
	helm, repo := helmBin(t)
	// Kustomize takes a directory outside the root only by a relative path.
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(repo, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + rel
	values, components := merged(t, localImages), ""
	for _, o := range optionsAndComponents {
		values = mergeValues(values, merged(t, o.values))
		if o.resource != "" {
			kust += ", " + rel + "/" + o.resource
		}
		if o.component != "" {
			components += ", " + rel + "/" + o.component
		}
	}
	kust += "]\ncomponents: [" + strings.TrimPrefix(components, ", ") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := exec.Command("kubectl", "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	want := objects(t, k)
	delete(want, "Namespace /"+world.Namespace)
	v, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	out, err := helmTemplate(t, helm, repo, string(v))
	if err != nil {
		t.Fatal(err)
	}
	got := objects(t, out)
	for k, o := range got {
		chartLabels(o)
		if strings.Contains(k, "/renumber-metrics-ca") {
			delete(got, k) // the chart's CA: TestChartRendersTheManifests
		}
	}
	sameObjects(t, got, want)
}

// merged is values (YAML) as a map.
func merged(t *testing.T, values string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(values), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// mergeValues is a with b's keys over it, maps merged key by key (as Helm
// merges values files).
func mergeValues(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		am, aok := out[k].(map[string]any)
		bm, bok := v.(map[string]any)
		if aok && bok {
			out[k] = mergeValues(am, bm)
			continue
		}
		out[k] = v
	}
	return out
}

// TestChartKnobsReachEveryWorkload: namespaceOverride moves every
// namespaced object (and the identities the admission policies and
// bindings name) out of the release's namespace; writer.strategy is the
// writer Deployment's; the shadow, which stands in for a writer, takes the
// writers' pull secrets, scheduling knobs and Pod labels as the writer does;
// each PodMonitor scrapes its component with that component's metricsAuth.
func TestChartKnobsReachEveryWorkload(t *testing.T) {
	helm, repo := helmBin(t)
	out, err := helmTemplate(t, helm, repo, `
namespaceOverride: net
imagePullSecrets: [{name: mirror}]
writer:
  strategy: {type: Recreate}
  metricsAuth: none
  nodeSelector: {role: infra}
  tolerations: [{key: infra, operator: Exists}]
  priorityClassName: high
  podLabels: {team: net}
shadow: {enabled: true}
monitoring: {podMonitor: {enabled: true}}
`)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	for k, o := range objs {
		u := unstructured.Unstructured{Object: o}
		if ns := u.GetNamespace(); ns != "" && ns != "net" && ns != "kube-system" {
			t.Errorf("%s: in %s, want net (namespaceOverride)", k, ns)
		}
		if strings.Contains(string(mustYAML(t, o)), world.Namespace) {
			t.Errorf("%s still names %s", k, world.Namespace)
		}
	}
	writer, shadow := objs["Deployment net/renumber-writer"], objs["Deployment net/renumber-shadow"]
	if s, _, _ := unstructured.NestedString(writer, "spec", "strategy", "type"); s != "Recreate" {
		t.Errorf("the writer's strategy: %q, want Recreate", s)
	}
	for _, f := range [][]string{{"imagePullSecrets"}, {"nodeSelector"}, {"tolerations"}, {"priorityClassName"}} {
		w, _, _ := unstructured.NestedFieldNoCopy(writer, append([]string{"spec", "template", "spec"}, f...)...)
		s, _, _ := unstructured.NestedFieldNoCopy(shadow, append([]string{"spec", "template", "spec"}, f...)...)
		if w == nil || !reflect.DeepEqual(w, s) {
			t.Errorf("%v: the writer's %v, the shadow's %v", f, w, s)
		}
	}
	if l, _, _ := unstructured.NestedString(shadow, "spec", "template", "metadata", "labels", "team"); l != "net" {
		t.Errorf("the shadow's Pods lack writer.podLabels: %q", l)
	}
	for name, want := range map[string]string{"renumber-writer": "", "renumber-agent": "https"} {
		eps, _, _ := unstructured.NestedSlice(objs["PodMonitor net/"+name], "spec", "podMetricsEndpoints")
		if len(eps) != 1 {
			t.Errorf("PodMonitor %s: %d endpoints", name, len(eps))
			continue
		}
		if got, _ := eps[0].(map[string]any)["scheme"].(string); got != want {
			t.Errorf("PodMonitor %s scrapes with scheme %q, want %q (its component's metricsAuth)", name, got, want)
		}
	}
}

func mustYAML(t *testing.T, o any) []byte {
	t.Helper()
	b, err := yaml.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKubePrometheusStackSelectsTheMonitors: kube-prometheus-stack's
// Prometheus selects monitors and rules labelled release: <its release>.
// The overlay manifests/monitoring/release-label's comment shows (copied
// from that comment, not restated) labels every PodMonitor and the
// PrometheusRule with the release it names, and so does the chart with the
// labels values docs/operating.md gives.
func TestKubePrometheusStackSelectsTheMonitors(t *testing.T) {
	helm, repo := helmBin(t)
	component, err := os.ReadFile(filepath.Join(repo, "manifests", "monitoring", "release-label", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, repo)
	if err != nil {
		t.Fatal(err)
	}
	var overlay strings.Builder
	for _, line := range strings.Split(string(component), "\n") {
		if rest, ok := strings.CutPrefix(line, "#   "); ok {
			overlay.WriteString(strings.ReplaceAll(rest, "<path>", rel) + "\n")
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := exec.Command("kubectl", "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize, the overlay of the component's comment:\n%s\n%v: %s", overlay.String(), err, k)
	}
	out, err := helmTemplate(t, helm, repo, "monitoring: {podMonitor: {enabled: true, labels: {release: prom}}, prometheusRule: {enabled: true, labels: {release: prom}}}\n")
	if err != nil {
		t.Fatal(err)
	}
	for name, objs := range map[string]map[string]map[string]any{"kustomize": objects(t, k), "chart": objects(t, out)} {
		n := 0
		for key, o := range objs {
			u := unstructured.Unstructured{Object: o}
			if u.GroupVersionKind().Group != "monitoring.coreos.com" {
				continue
			}
			n++
			if got := u.GetLabels()["release"]; got != "prom" {
				t.Errorf("%s: %s labelled release %q, want prom", name, key, got)
			}
		}
		if n != 3 {
			t.Errorf("%s: %d monitoring objects, want 3 (two PodMonitors, a PrometheusRule)", name, n)
		}
	}
}
