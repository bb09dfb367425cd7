package e2e

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/tools/world"
)

// The kind path cannot run here (no container engine); these check every piece
// of it that can be checked without one. The kind config itself is checked
// against kind's own types in tools/kind.

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
	scripts = append(scripts, filepath.Join(repo, ".ci", "run"))
	if out, err := exec.Command("shellcheck", scripts...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// TestKindFailsFastWithoutDocker: without a reachable Docker daemon `make
// e2e-kind` stops at once with a message saying so, exit code 2.
func TestKindFailsFastWithoutDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a script")
	}
	if exec.Command("docker", "info").Run() == nil {
		t.Skip("a Docker daemon answers here: make e2e-kind would really run")
	}
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{
		"no docker command":   "/nonexistent",
		"no daemon answering": os.Getenv("PATH"),
	} {
		if _, err := exec.LookPath("docker"); err != nil && name == "no daemon answering" {
			continue // no docker CLI here either: the first case covers it
		}
		cmd := exec.Command("/bin/bash", filepath.Join(repo, "e2e", "kind", "run.sh"))
		cmd.Env = append(os.Environ(), "PATH="+path)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "Docker") || !strings.Contains(string(out), "make e2e") {
			t.Errorf("%s: exit %v, output %q; want exit 2 and a message naming Docker and make e2e", name, err, out)
		}
	}
}
