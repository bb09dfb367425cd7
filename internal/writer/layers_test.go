// The writer's stages, as docs/architecture.md draws them: each imports only
// the stages before it, and which DynamicPrefix an object follows is read in
// one place (backends/follow.go; a Service's annotations with the rest of
// what it asks for in render/service.go).

package writer_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/renumber/renumber/"

// stages lists each stage of internal/writer and the stages it may import.
var stages = map[string][]string{
	"api":        {},
	"decide":     {"api"},
	"render":     {"api", "decide"},
	"permit":     {"api"},
	"backends":   {"api", "render"},
	"caches":     {"api", "backends", "decide", "render"},
	"apply":      {"api", "backends", "decide", "render", "permit"},
	"handover":   {"api", "backends", "decide", "render"},
	"election":   {},
	"review":     {},
	"resolve":    {"api", "decide"},
	"controller": {"api", "apply", "backends", "caches", "decide", "render", "resolve", "permit"},
	"inspect":    {"api", "backends", "controller", "decide", "render", "permit"},
}

// sources parses the non-test Go files under dir.
func sources(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	out := map[string]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(path)] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEachStageImportsOnlyTheStagesBeforeIt(t *testing.T) {
	seen := map[string]bool{}
	for path, f := range sources(t, ".") {
		stage, _, _ := strings.Cut(path, "/")
		allowed, known := stages[stage]
		if !known {
			t.Errorf("%s: stage %q is not in this test's list: say what it may import", path, stage)
			continue
		}
		seen[stage] = true
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			other, ok := strings.CutPrefix(p, module+"internal/writer/")
			if !ok {
				continue
			}
			if !slices.Contains(allowed, other) {
				t.Errorf("%s imports %s: %s may import only %v", path, other, stage, allowed)
			}
		}
	}
	for stage := range stages {
		if !seen[stage] {
			t.Errorf("stage %s has no source here: drop it from the list", stage)
		}
	}
}

// Which DynamicPrefix an object follows is read in one place.
func TestTheFollowRelationIsReadInOnePlace(t *testing.T) {
	home := []string{"internal/writer/backends/follow.go", "internal/writer/render/service.go"}
	files := map[string]*ast.File{}
	for _, dir := range []string{".", "../../writer"} {
		for path, f := range sources(t, dir) {
			files[filepath.ToSlash(filepath.Clean(filepath.Join("internal/writer", path)))] = f
		}
	}
	if len(files) < 20 {
		t.Fatalf("read %d files: is this the writer's directory?", len(files))
	}
	for path, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "AnnotationName" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "dynamicprefix" && !slices.Contains(home, path) {
				t.Errorf("%s reads dynamicprefix.AnnotationName: ask backends (Kind.Follows, CalicoFollows, AdvertisementFollows, ServiceFollows, PoolFollowOf, MadeFor)", path)
			}
			return true
		})
	}
}
