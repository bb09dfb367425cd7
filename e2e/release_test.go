package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/renumber/renumber/tools/world"
)

// TestWorkflowsPinActionsByCommit: every action a workflow uses is pinned to
// a commit (a tag can be moved), with the version it is as a comment for
// the reader and for update bots.
func TestWorkflowsPinActionsByCommit(t *testing.T) {
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(repo, ".github", "workflows", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows: %v", err)
	}
	uses := regexp.MustCompile(`(?m)^\s*(?:-\s*)?uses:\s*(\S+)(.*)$`)
	pinned := regexp.MustCompile(`^[\w.-]+/[\w./-]+@[0-9a-f]{40}$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range uses.FindAllStringSubmatch(string(b), -1) {
			if !pinned.MatchString(m[1]) || !strings.HasPrefix(strings.TrimSpace(m[2]), "# v") {
				t.Errorf("%s: uses %s%s: want owner/repo@<40-hex commit> # vX.Y.Z", filepath.Base(f), m[1], m[2])
			}
		}
	}
}
