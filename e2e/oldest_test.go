package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// TestTheOldestKubernetesTheChartClaims: the chart's kubeVersion names the
// oldest Kubernetes it supports, and that API server (built from the module
// proxy, make tools) takes `helm install` (Helm checks kubeVersion against
// it), serves the CRD's validation (the trustedRouters rule, with the CEL IP
// library), and enforces every admission policy on the identities it binds
// (the same checks as TestAgentCanTouchOnlyItsOwnDigest and
// TestWriterCanTouchOnlyItsOwnFields).
func TestTheOldestKubernetesTheChartClaims(t *testing.T) {
	skipWithoutWorld(t)
	helmBin(t)
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart, err := os.ReadFile(filepath.Join(repo, "charts", "renumber", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`kubeVersion: ">=1\.(\d+)\.0-0"`).FindSubmatch(chart)
	if m == nil {
		t.Fatal(`Chart.yaml: no kubeVersion ">=1.N.0-0"`)
	}
	bin := "kube-apiserver-1." + string(m[1])
	if _, err := world.Bin(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing in CI: make tools builds it: %v", bin, err)
		}
		t.Skipf("%s not built (make tools)", bin)
	}
	w := startWorld(t, world.Options{APIServer: bin})
	ctx := t.Context()
	v, err := w.API.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1." + string(m[1]) + "."; !strings.HasPrefix(v.GitVersion, want) {
		t.Fatalf("the API server is %s, want %s*", v.GitVersion, want)
	}
	if out, err := installRenumber(t, w, filepath.Join(repo, "charts", "renumber"), "--set", "shadow.enabled=true"); err != nil {
		t.Fatalf("helm install on %s: %v\n%s", v.GitVersion, err, out)
	}

	for name, routers := range map[string]string{"link-local": "fe80::1", "global": "2001:db8::1"} {
		err := createDPErr(t, w, "dp-"+name, map[string]any{"acquisition": map[string]any{
			"routerAdvertisement": map[string]any{"interface": "eth0", "trustedRouters": []any{routers}}}})
		if name == "link-local" && err != nil {
			t.Errorf("trustedRouters [%s] refused on %s: %v", routers, v.GitVersion, err)
		}
		if name == "global" && (err == nil || !strings.Contains(err.Error(), "trustedRouters")) {
			t.Errorf("trustedRouters [%s] on %s: %v, want refused by the CRD's rule", routers, v.GitVersion, err)
		}
	}

	// The admission policies, as the identities they bind.
	for _, node := range []string{"node1", "node2"} {
		if err := w.API.CreateNode(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	agentPolicyHolds(t, w, world.Namespace, "renumber-agent")
	if err := w.API.InstallCiliumCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	writerPolicyHolds(t, w, world.Namespace, "renumber-writer")
}

// createDPErr creates a DynamicPrefix with spec and returns the API server's answer.
func createDPErr(t *testing.T, w *world.World, name string, spec map[string]any) error {
	t.Helper()
	_, err := w.API.Dynamic.Resource(api.GVR).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}, metav1.CreateOptions{})
	return err
}
