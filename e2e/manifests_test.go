package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

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
}
