package apply

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writeOptions are the options every client-go write takes: naming one is
// making (or preparing) an API write.
var writeOptions = map[string]bool{
	"CreateOptions": true, "UpdateOptions": true, "PatchOptions": true,
	"DeleteOptions": true, "ApplyOptions": true,
}

// TestEveryWriteOfTheWriterIsMadeHere keeps the writer's API writes in this
// package, where each passes the write permit, is counted and can be planned
// instead (shadow). The exceptions: the leader election's Lease, written by
// client-go's elector through package election, and the reviews of scrapers'
// tokens (package review: TokenReviews and SubjectAccessReviews, which the API
// server stores nowhere). A file elsewhere under internal/writer that names a
// write's options fails the test.
func TestEveryWriteOfTheWriterIsMadeHere(t *testing.T) {
	root := ".."
	allowed := map[string]bool{"apply": true, "election": true, "review": true}
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if allowed[strings.Split(filepath.ToSlash(rel), "/")[0]] {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		meta := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "k8s.io/apimachinery/pkg/apis/meta/v1" {
				meta = "v1"
				if imp.Name != nil {
					meta = imp.Name.Name
				}
			}
		}
		if meta == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && writeOptions[sel.Sel.Name] {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == meta {
					found = append(found, fset.Position(sel.Pos()).String()+": "+id.Name+"."+sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("API writes outside internal/writer/apply (make them here, through the permit):\n%s", strings.Join(found, "\n"))
	}
}
