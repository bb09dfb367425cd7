package e2e

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/renumber/renumber/tools/world"
)

// Checks of the kind path that need no engine; the path itself runs in make
// test's kind smoke (e2e/kind/run.sh) and make e2e-kind. The kind config is
// checked against kind's own types in tools/kind.

// TestKindRouterConfig: the router container starts with what the local world's
// router would be told for prefix A, and radvd accepts it.
func TestKindRouterConfig(t *testing.T) {
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(repo, "e2e", "kind", "radvd.conf")
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := world.RadvdConf([]world.Advert{{Prefix: netip.MustParsePrefix("2001:db8:1:100::/64"), Valid: 600 * time.Second, Preferred: 300 * time.Second}}, nil)
	if string(got) != want {
		t.Errorf("e2e/kind/radvd.conf differs from the world's rendering:\n%s\nwant\n%s", got, want)
	}
	if _, err := exec.LookPath("radvd"); err != nil {
		t.Skip("radvd not installed (make deps)")
	}
	if out, err := exec.Command("radvd", "-c", "-C", file).CombinedOutput(); err != nil {
		t.Errorf("radvd -c refuses e2e/kind/radvd.conf: %v\n%s", err, out)
	}
}

// TestKindScriptsAreLinted runs shellcheck over the scripts.
func TestKindScriptsAreLinted(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Skip("shellcheck not installed (make deps)")
	}
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	scripts, _ := filepath.Glob(filepath.Join(repo, "e2e", "kind", "*.sh"))
	scripts = append(scripts, filepath.Join(repo, "e2e", "kind", "runc-wrapper"),
		filepath.Join(repo, "tools", "kind", "node-image.sh"), filepath.Join(repo, ".ci", "run"))
	if out, err := exec.Command("shellcheck", scripts...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}
