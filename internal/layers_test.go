// The module's layering, as an order: every package has a rank and imports
// only packages of lower rank; the agent's side and the writer's side never
// import each other; and some packages may not import some libraries at all
// (the pure cores import none of Kubernetes, only the writer's backends
// import Cilium) - the pure cores and the agent not through another package
// either (deep, checked with go list). A new package fails here until it is
// given a rank, so adding one is a decision, not a silence.

package internal_test

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/renumber/renumber/"

// ranks lists the module's packages (paths under the module), lowest rank
// first. A package imports only packages of a lower rank: so no cycles, and
// an import that runs back up the stack is refused where it is written.
var ranks = [][]string{
	// Shared leaves: formats and plumbing both sides use.
	{"internal/version", "internal/backoff", "internal/digest", "internal/dynamicprefix", "internal/logs"},
	{"internal/metrics"},
	{"internal/requests"},

	// The agent's side: what it reads (policy, observe), how it reads
	// (dhcp6, ra, kernel, uplink), how it talks to the API (kubeconfig,
	// kubehttp, node, publish), and the agent that ties them; below them,
	// the link their tests listen on (vethtest).
	{"internal/agent/vethtest"},
	{"internal/agent/policy", "internal/agent/kubeconfig", "internal/agent/dhcp6", "internal/agent/publish"},
	{"internal/agent/observe", "internal/agent/kubehttp"},
	{"internal/agent/ra", "internal/agent/kernel", "internal/agent/node", "internal/agent/uplink"},
	{"internal/agent"},
	{"agent"},

	// The writer's side, in the stages of docs/architecture.md. The model
	// first: a spec parsed, free of Kubernetes; then the served object.
	{"internal/writer/model"},
	{"internal/writer/api", "internal/writer/election", "internal/writer/review"},
	// The nouns the backends read objects into and render plans in: pool
	// entries, their form and our ownership record, what a Service asks for
	// and carries. Below render and the backends, so the backends never
	// import render.
	{"internal/writer/holdings"},
	{"internal/writer/decide", "internal/writer/permit"},
	{"internal/writer/render", "internal/writer/resolve"},
	{"internal/writer/backends"},
	{"internal/writer/caches", "internal/writer/apply", "internal/writer/handover"},
	{"internal/writer/controller"},
	{"internal/writer/inspect"},
	{"writer", "writer/kubectl-renumber"},

	// Tools: the test world and what drives it; they may use the formats
	// above, never the agent's or the writer's internals (sides below).
	{"tools/world", "tools/loadgen", "tools/chartdoc", "tools/chartfiles", "tools/kindnet", "tools/krew"},
	{"tools/demo", "tools/worldctl", "tools/bench"},
}

// sides: packages under one never import packages under another.
var sides = map[string][]string{
	"agent":  {"internal/agent", "agent"},
	"writer": {"internal/writer", "writer"},
	"tools":  {"tools"},
}

// mayCross: imports across sides that are allowed, and why.
var mayCross = map[[2]string]string{
	// The load generator and the bench write DynamicPrefixes as users do,
	// through the served API's types.
	{"tools/bench", "internal/writer/api"}:    "the bench creates DynamicPrefixes",
	{"tools/bench", "internal/writer/model"}:  "the bench splices a Service's suffix onto a prefix as the writer does",
	{"tools/bench", "internal/writer/permit"}: "the bench bounds a fight by the breaker's free writes per decision",
}

// forbidden: import path prefixes a package (and the packages under it) may
// not import.
var forbidden = map[string][]string{
	// The agent talks to the API server through its own small client
	// (kubehttp): client-go's machinery and Kubernetes' types would
	// multiply its memory on every node.
	"internal/agent": {"k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/client-go/", "github.com/cilium/"},
	"agent":          {"k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/client-go/", "github.com/cilium/"},
	// Pure cores: formats and decisions, no Kubernetes at all.
	"internal/digest":          {"k8s.io/", "sigs.k8s.io/"},
	"internal/agent/policy":    {"k8s.io/", "sigs.k8s.io/"},
	"internal/agent/observe":   {"k8s.io/", "sigs.k8s.io/"},
	"internal/writer/decide":   {"k8s.io/", "sigs.k8s.io/"},
	"internal/writer/model":    {"k8s.io/", "sigs.k8s.io/"},
	"internal/writer/api":      {"k8s.io/client-go/", "github.com/cilium/"},
	"internal/writer/holdings": {"k8s.io/client-go/", "github.com/cilium/"},
	"internal/writer/render":   {"k8s.io/client-go/", "github.com/cilium/"},
	// The backends speak the nouns (holdings), never the renderer.
	"internal/writer/backends": {module + "internal/writer/render"},
	"internal/writer/resolve":  {"k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/client-go/", "github.com/cilium/"},
	// Cilium's Go types cost memory and build time (../shared/notes/cilium.md):
	// only the backends speak Cilium.
	"internal/writer/controller": {"github.com/cilium/"},
	"internal/writer/apply":      {"github.com/cilium/"},
	"internal/writer/caches":     {"github.com/cilium/"},
	"internal/writer/inspect":    {"github.com/cilium/"},
	"writer":                     {"github.com/cilium/"},
}

// deep: packages (and those under them) whose forbidden list holds for
// everything they depend on, not only their own imports: a pure core stays
// pure only if nothing it imports brings Kubernetes in (decide imported no
// k8s.io package itself and still built 45 of them, through writer/api),
// and the agent's memory is what it links, not what it names.
var deep = []string{"internal/digest", "internal/agent", "agent", "internal/writer/decide", "internal/writer/model"}

// debt: forbidden imports still made, each to go. The list may only
// shrink: an entry no longer imported fails too, so it is taken out. (Empty
// since issue 43 made decide a pure function of the model, the votes and
// the clock.)
var debt = map[string][]string{}

// imports returns, per package directory under root (slash-separated,
// relative), the imports of its non-test Go files.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module (tools/kind, tools/images)
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		out[pkg] = append(out[pkg], "") // the package exists, imports or not
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out[pkg] = append(out[pkg], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// under reports whether pkg is dir or a package below it.
func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

func sideOf(pkg string) string {
	best, side := "", ""
	for s, dirs := range sides {
		for _, d := range dirs {
			if under(pkg, d) && len(d) > len(best) {
				best, side = d, s
			}
		}
	}
	return side
}

func TestEachPackageImportsOnlyLowerRanks(t *testing.T) {
	rank := map[string]int{}
	for r, pkgs := range ranks {
		for _, p := range pkgs {
			if _, dup := rank[p]; dup {
				t.Errorf("%s is ranked twice", p)
			}
			rank[p] = r
		}
	}
	pkgs := imports(t, "..")
	if len(pkgs) < 40 {
		t.Fatalf("found %d packages: is this the module's internal directory?", len(pkgs))
	}
	for pkg, imps := range pkgs {
		if under(pkg, "e2e") || pkg == "manifests" || pkg == "internal/writer" && len(slices.DeleteFunc(slices.Clone(imps), func(s string) bool { return s == "" })) == 0 {
			continue // tests only, embedded files, or the writer's directory's tests
		}
		r, ok := rank[pkg]
		if !ok {
			t.Errorf("%s has no rank in this test: say where it stands (ranks)", pkg)
			continue
		}
		for _, imp := range imps {
			other, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			ro, ok := rank[other]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no rank", pkg, other)
			case ro >= r:
				t.Errorf("%s (rank %d) imports %s (rank %d): import only lower ranks", pkg, r, other, ro)
			}
			if a, b := sideOf(pkg), sideOf(other); a != "" && b != "" && a != b && mayCross[[2]string{pkg, other}] == "" {
				t.Errorf("%s (the %s's side) imports %s (the %s's side)", pkg, a, other, b)
			}
		}
	}
	for p := range rank {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("%s is ranked but has no source: drop it from ranks", p)
		}
	}
}

func TestForbiddenImportsStayOut(t *testing.T) {
	pkgs := imports(t, "..")
	owed := map[string]bool{}
	for pkg, imps := range pkgs {
		for dir, prefixes := range forbidden {
			if !under(pkg, dir) {
				continue
			}
			for _, imp := range imps {
				for _, pre := range prefixes {
					if !strings.HasPrefix(imp, pre) {
						continue
					}
					if slices.Contains(debt[pkg], imp) {
						owed[pkg+" "+imp] = true
						continue
					}
					t.Errorf("%s imports %s: nothing under %s may import %s", pkg, imp, dir, pre)
				}
			}
		}
	}
	for pkg, imps := range debt {
		for _, imp := range imps {
			if !owed[pkg+" "+imp] {
				t.Errorf("%s no longer imports %s: take it out of debt", pkg, imp)
			}
		}
	}
}

// deps returns the module's packages under dirs and, for each package they
// depend on (theirs included), its imports, from go list.
func deps(t *testing.T, dirs []string) (roots []string, graph map[string][]string) {
	t.Helper()
	args := []string{"list", "-deps", "-f", "{{.ImportPath}} {{.Module}} {{join .Imports \" \"}}"}
	for _, d := range dirs {
		args = append(args, module+d+"/...")
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	graph = map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		pkg, mod := f[0], f[1]
		graph[pkg] = f[2:]
		if mod == strings.TrimSuffix(module, "/") && slices.ContainsFunc(dirs, func(d string) bool { return under(strings.TrimPrefix(pkg, module), d) }) {
			roots = append(roots, pkg)
		}
	}
	return roots, graph
}

// chain returns the import path from root to the first package reached that
// has a prefix in bad (breadth first, so the shortest), or nil.
func chain(graph map[string][]string, root string, bad []string) []string {
	from := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if slices.ContainsFunc(bad, func(pre string) bool { return strings.HasPrefix(p, pre) }) {
			var path []string
			for ; p != ""; p = from[p] {
				path = append([]string{strings.TrimPrefix(p, module)}, path...)
			}
			return path
		}
		for _, q := range graph[p] {
			if _, seen := from[q]; !seen {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

func TestForbiddenDependenciesStayOutAllTheWayDown(t *testing.T) {
	roots, graph := deps(t, deep)
	if len(roots) < len(deep) {
		t.Fatalf("go list found %d packages under %v: is this the module?", len(roots), deep)
	}
	for _, root := range roots {
		pkg := strings.TrimPrefix(root, module)
		for dir, prefixes := range forbidden {
			if !under(pkg, dir) || !slices.ContainsFunc(deep, func(d string) bool { return under(pkg, d) }) {
				continue
			}
			if path := chain(graph, root, prefixes); path != nil {
				t.Errorf("%s depends on %s (%s): nothing under %s may depend on %v", pkg, path[len(path)-1], strings.Join(path, " -> "), dir, prefixes)
			}
		}
	}
}
