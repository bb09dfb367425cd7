package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

const crdName = "dynamicprefixes.dynamic-prefix.io"

// bareWorld is an API server alone: no CRD, no RBAC - what the Helm releases
// under test bring themselves.
func bareWorld(t *testing.T) *world.World { return bareWorldWith(t, 0) }

// helmIn runs the pinned Helm against w as the admin.
func helmIn(t *testing.T, w *world.World, args ...string) (string, error) {
	t.Helper()
	helm, _ := helmBin(t)
	out, err := exec.CommandContext(t.Context(), helm, append(args, "--kubeconfig", w.API.AdminFile)...).CombinedOutput()
	return string(out), err
}

// installRenumber is `helm install renumber <chart> -n renumber-system` with
// the images built here and more flags.
func installRenumber(t *testing.T, w *world.World, chart string, more ...string) (string, error) {
	t.Helper()
	args := []string{"install", "renumber", chart, "-n", world.Namespace, "--create-namespace"}
	for _, s := range world.LocalImages {
		args = append(args, "--set", s)
	}
	return helmIn(t, w, append(args, more...)...)
}

// served reports whether the CRD's schema lists path (spec or status fields),
// so the API server keeps it rather than pruning it.
func served(t *testing.T, w *world.World, path ...string) bool {
	t.Helper()
	crd := get(t, w, crdGVR, crdName)
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	node, _ := versions[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
	for _, p := range path {
		next, ok, _ := unstructured.NestedMap(node, "properties", p)
		if !ok {
			if items, ok2, _ := unstructured.NestedMap(node, "items", "properties", p); ok2 {
				next, ok = items, true
			}
		}
		if !ok {
			return false
		}
		node = next
	}
	return true
}

// operatorDP is a DynamicPrefix as a user of the existing operator wrote it,
// with renumber's quorum and allowedPrefixes added (which that operator's CRD
// prunes), its finalizer, and the status that operator wrote.
func operatorDP(t *testing.T, w *world.World) *unstructured.Unstructured {
	t.Helper()
	apply(t, w, api.GVR, map[string]any{
		"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": "home", "finalizers": []any{dynamicprefix.Finalizer}},
		"spec": map[string]any{
			"acquisition": map[string]any{
				"routerAdvertisement": map[string]any{"interface": "eth0", "enabled": true},
				"prefixFilter":        map[string]any{"requireGlobalUnicast": true, "allowedPrefixes": []any{"2001:db8::/32"}},
				"quorum":              int64(2),
			},
			"addressRanges": []any{map[string]any{"name": "lb", "start": "::ffff:0:10", "end": "::ffff:0:20"}},
			"subnets":       []any{map[string]any{"name": "svc", "offset": int64(1), "prefixLength": int64(112), "bgp": map[string]any{"advertise": true}}},
			"transition":    map[string]any{"mode": "ha", "maxPrefixHistory": int64(3)},
		},
	})
	status := `{"status":{"currentPrefix":"2001:db8:b::/64","prefixSource":"router-advertisement","leaseExpiresAt":"2026-11-20T10:00:00Z",
		"history":[{"prefix":"2001:db8:b::/64","acquiredAt":"2026-11-01T10:00:00Z","state":"active"},
		{"prefix":"2001:db8:a::/64","acquiredAt":"2026-10-01T10:00:00Z","deprecatedAt":"2026-11-01T10:00:00Z","state":"draining"}],
		"conditions":[{"type":"PrefixAcquired","status":"True","reason":"RouterAdvertisement","message":"from eth0","lastTransitionTime":"2026-11-01T10:00:00Z"}]}}`
	u, err := w.API.Dynamic.Resource(api.GVR).Patch(t.Context(), "home", types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSwitchingFromTheExistingOperatorsHelmRelease: that operator's chart
// installs its CRD from crds/, which its release does not own and which
// prunes renumber's fields. Installing renumber's chart after it takes the CRD
// over (--take-ownership; without it Helm refuses, naming the CRD), and then:
// every DynamicPrefix is kept (uid, spec, status, finalizer), renumber's
// fields are served, and uninstalling renumber leaves the CRD and the objects.
func TestSwitchingFromTheExistingOperatorsHelmRelease(t *testing.T) {
	w := bareWorld(t)
	_, repo := helmBin(t)
	if out, err := helmIn(t, w, "install", "dpo", filepath.Join(repo, "e2e", "testdata", "dynamic-prefix-operator"),
		"-n", "dpo-system", "--create-namespace"); err != nil {
		t.Fatalf("installing the existing operator's chart: %v\n%s", err, out)
	}
	before := operatorDP(t, w)
	if _, found, _ := unstructured.NestedFieldNoCopy(before.Object, "spec", "acquisition", "quorum"); found {
		t.Fatal("the existing operator's CRD served quorum: the fixture does not stand for it")
	}
	if out, err := helmIn(t, w, "uninstall", "dpo", "-n", "dpo-system"); err != nil {
		t.Fatalf("helm uninstall dpo: %v\n%s", err, out)
	}

	out, err := installRenumber(t, w, filepath.Join(repo, "charts", "renumber"))
	if err == nil || !strings.Contains(out, crdName) {
		t.Fatalf("helm install over the unowned CRD: %v, want refused naming the CRD:\n%s", err, out)
	}
	if out, err := helmIn(t, w, "uninstall", "renumber", "-n", world.Namespace); err != nil && !strings.Contains(out, "not found") {
		t.Fatalf("clearing the refused release: %v\n%s", err, out)
	}
	if out, err := installRenumber(t, w, filepath.Join(repo, "charts", "renumber"), "--take-ownership"); err != nil {
		t.Fatalf("helm install --take-ownership: %v\n%s", err, out)
	}

	crd := get(t, w, crdGVR, crdName)
	if crd.GetAnnotations()["meta.helm.sh/release-name"] != "renumber" || crd.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("the CRD is not the renumber release's: labels %v annotations %v", crd.GetLabels(), crd.GetAnnotations())
	}
	for _, p := range [][]string{{"spec", "acquisition", "quorum"}, {"spec", "acquisition", "prefixFilter", "allowedPrefixes"},
		{"spec", "acquisition", "dhcpv6pd", "mode"}, {"status", "dhcpv6pd"}, {"status", "history", "expiresAt"}} {
		if !served(t, w, p...) {
			t.Errorf("the CRD after the switch does not serve %v", p)
		}
	}
	after := get(t, w, api.GVR, "home")
	if after.GetUID() != before.GetUID() || !slices.Contains(after.GetFinalizers(), dynamicprefix.Finalizer) {
		t.Errorf("home replaced or its finalizer lost: uid %s -> %s, finalizers %v", before.GetUID(), after.GetUID(), after.GetFinalizers())
	}
	for _, f := range []string{"spec", "status"} {
		if !within(before.Object[f], after.Object[f]) {
			b, _ := yaml.Marshal(before.Object[f])
			a, _ := yaml.Marshal(after.Object[f])
			t.Errorf("home's %s changed by the switch (beyond the CRD's defaults):\n%s\nto\n%s", f, b, a)
		}
	}
	patch := `{"spec":{"acquisition":{"quorum":2,"prefixFilter":{"allowedPrefixes":["2001:db8::/32"]}}}}`
	u, err := w.API.Dynamic.Resource(api.GVR).Patch(t.Context(), "home", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q, _, _ := unstructured.NestedInt64(u.Object, "spec", "acquisition", "quorum"); q != 2 {
		t.Errorf("quorum after the switch: %d, want 2 (served, not pruned)", q)
	}

	if out, err := helmIn(t, w, "uninstall", "renumber", "-n", world.Namespace); err != nil {
		t.Fatalf("helm uninstall renumber: %v\n%s", err, out)
	}
	if q, _, _ := unstructured.NestedInt64(get(t, w, api.GVR, "home").Object, "spec", "acquisition", "quorum"); q != 2 {
		t.Errorf("after helm uninstall: home's quorum %d, want the CRD and the object kept", q)
	}
}

// within reports whether every field of a is in b with the same value (b may
// have more: the defaults renumber's CRD adds, such as quorum 1).
func within(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k, v := range am {
			if !within(v, bm[k]) {
				return false
			}
		}
		return true
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			if !within(as[i], bs[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// TestChartUpgradesItsCRD: a field a new chart version adds to the CRD is
// served after `helm upgrade` (a CRD in crds/ would never be upgraded), and
// the objects of the version before are kept.
func TestChartUpgradesItsCRD(t *testing.T) {
	w := bareWorld(t)
	_, repo := helmBin(t)
	if out, err := installRenumber(t, w, filepath.Join(repo, "charts", "renumber")); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	minimalDP(t, w, "home")
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(t.Context(), "home", types.MergePatchType,
		[]byte(`{"spec":{"acquisition":{"quorum":2}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	before := get(t, w, api.GVR, "home")

	next := nextChart(t, repo)
	if out, err := helmIn(t, w, "upgrade", "renumber", next, "-n", world.Namespace, "--reuse-values"); err != nil {
		t.Fatalf("helm upgrade to N+1: %v\n%s", err, out)
	}
	if !served(t, w, "spec", "acquisition", "nextVersionField") {
		t.Fatal("after helm upgrade the CRD lacks the field N+1 added")
	}
	u, err := w.API.Dynamic.Resource(api.GVR).Patch(t.Context(), "home", types.MergePatchType,
		[]byte(`{"spec":{"acquisition":{"nextVersionField":"x"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(u.Object, "spec", "acquisition", "nextVersionField"); v != "x" {
		t.Errorf("N+1's field pruned: %v", u.Object["spec"])
	}
	if q, _, _ := unstructured.NestedInt64(u.Object, "spec", "acquisition", "quorum"); q != 2 || u.GetUID() != before.GetUID() {
		t.Errorf("home after the upgrade: quorum %d uid %s, want 2 and %s", q, u.GetUID(), before.GetUID())
	}
}

// nextChart is the chart as a version N+1 would be: the same, version 0.2.0,
// with a new optional field in the CRD (spec.acquisition.nextVersionField).
func nextChart(t *testing.T, repo string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "renumber")
	if out, err := exec.Command("cp", "-rL", filepath.Join(repo, "charts", "renumber"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copying the chart: %v\n%s", err, out)
	}
	crdFile := filepath.Join(dir, "files", "crd.yaml")
	raw, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	v0 := versions[0].(map[string]any)
	if err := unstructured.SetNestedField(v0, map[string]any{"type": "string"},
		"schema", "openAPIV3Schema", "properties", "spec", "properties", "acquisition", "properties", "nextVersionField"); err != nil {
		t.Fatal(err)
	}
	versions[0] = v0
	if err := unstructured.SetNestedSlice(crd, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	chartFile := filepath.Join(dir, "Chart.yaml")
	meta, err := os.ReadFile(chartFile)
	if err != nil {
		t.Fatal(err)
	}
	for f, b := range map[string][]byte{crdFile: out, chartFile: []byte(strings.Replace(string(meta), "version: 0.1.0", "version: 0.2.0", 1))} {
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
