// Which DynamicPrefix an object follows is read in one place
// (backends/follow.go; a Service's annotations with the rest of what it asks
// for in holdings/service.go). The stages' order is internal/layers_test.go's.

package writer_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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

// Which DynamicPrefix an object follows is read in one place.
func TestTheFollowRelationIsReadInOnePlace(t *testing.T) {
	home := []string{"internal/writer/backends/follow.go", "internal/writer/holdings/service.go"}
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
