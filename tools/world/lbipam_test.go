package world

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestLBIPAMBuildsWithTheProductsDependencies: tools/lbipam is its own
// module, but every module it shares with the product is required at the
// product's version - the same Cilium whose CRDs the world installs, and
// packages compiled once for both (a cold make test builds them once).
func TestLBIPAMBuildsWithTheProductsDependencies(t *testing.T) {
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	product := requires(t, filepath.Join(repo, "go.mod"))
	lbipam := requires(t, filepath.Join(repo, "tools", "lbipam", "go.mod"))
	if product["github.com/cilium/cilium"] == "" || lbipam["github.com/cilium/cilium"] == "" {
		t.Fatalf("cilium not required by both: product %q, lbipam %q", product["github.com/cilium/cilium"], lbipam["github.com/cilium/cilium"])
	}
	for path, want := range product {
		if got, ok := lbipam[path]; ok && got != want {
			t.Errorf("tools/lbipam requires %s %s, the product %s: cd tools/lbipam && go get %s@%s", path, got, want, path, want)
		}
	}
}

// requires reads the module versions a go.mod requires, parsed by the go
// command (go mod edit -json reads the file alone: nothing is downloaded).
func requires(t *testing.T, file string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "mod", "edit", "-json", file).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", file, err)
	}
	var mod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, r := range mod.Require {
		versions[r.Path] = r.Version
	}
	return versions
}
