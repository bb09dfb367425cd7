package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/tools/world"
)

// TestManifestsAreAcceptedByTheAPIServer applies exactly what `kubectl apply -k
// manifests/` would, plus the example, against the real API server: schemas,
// RBAC objects and workloads must all be valid.
func TestManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	w := newWorld(t, 0)
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := exec.Command("kubectl", "kustomize", filepath.Join(repo, "manifests")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	if err := w.API.ApplyYAML(t.Context(), out); err != nil {
		t.Fatalf("the API server refuses the kustomization: %v", err)
	}
	if err := w.API.Apply(t.Context(), filepath.Join(repo, "manifests", "examples", "home.yaml")); err != nil {
		t.Fatalf("the API server refuses the example: %v", err)
	}

	// Step 1 of the README's migration: the install with the shadow component
	// and the writer scaled to 0. (Kustomize refuses an overlay inside the
	// directory it builds on, so it lives outside manifests/, as the user's does.)
	dir := filepath.Join(repo, "_out", "migrate-"+t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	overlay := "resources: [../../manifests]\ncomponents: [../../manifests/shadow]\nreplicas: [{name: renumber-writer, count: 0}]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("kubectl", "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize (migration overlay): %v", err)
	}
	if err := w.API.ApplyYAML(t.Context(), out); err != nil {
		t.Fatalf("the API server refuses the migration overlay: %v", err)
	}
	deploys := w.API.Client.AppsV1().Deployments(world.Namespace)
	writer, err := deploys.Get(t.Context(), "renumber-writer", metav1.GetOptions{})
	if err != nil || writer.Spec.Replicas == nil || *writer.Spec.Replicas != 0 {
		t.Errorf("writer after the migration overlay: %v, want 0 replicas", err)
	}
	shadow, err := deploys.Get(t.Context(), "renumber-shadow", metav1.GetOptions{})
	if err != nil || !slices.Contains(shadow.Spec.Template.Spec.Containers[0].Args, "--dry-run") ||
		shadow.Spec.Template.Spec.ServiceAccountName != "renumber-shadow" {
		t.Errorf("shadow: %v, want --dry-run as renumber-shadow", err)
	}
}
