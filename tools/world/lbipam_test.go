package world

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
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

// requires reads the module versions a go.mod requires (replacements aside).
func requires(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	block := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "require" && len(fields) == 2 && fields[1] == "(":
			block = true
		case block && fields[0] == ")":
			block = false
		case block && len(fields) == 2:
			out[fields[0]] = fields[1]
		case fields[0] == "require" && len(fields) == 3:
			out[fields[1]] = fields[2]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
