package backends

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The shipped manifests, from the repository's root: each as manifests/ has it
// and as the chart embeds it (tools/chartfiles copies them).
var (
	writerRBAC    = []string{"manifests/writer/rbac.yaml", "charts/renumber/files/writer-rbac.yaml"}
	readerRBAC    = []string{"manifests/reader/rbac.yaml", "charts/renumber/files/reader-rbac.yaml"}
	kubeVIPRBAC   = "manifests/kube-vip/rbac.yaml"
	policies      = []string{"manifests/writer/policy.yaml", "charts/renumber/files/writer-policy.yaml"}
	valuePolicies = []string{"manifests/writer/policy-values.yaml", "charts/renumber/files/writer-policy-values.yaml"}
)

// notKinds: what the writer is granted beyond its backends, and why.
var notKinds = map[string][]string{
	"/nodes":                            readVerbs,  // the agents' digests
	"/services":                         patchVerbs, // HA mode's address, target and record annotations
	"dynamic-prefix.io/dynamicprefixes": patchVerbs, // patch: the existing operator's finalizer, removed
	"dynamic-prefix.io/dynamicprefixes/status":       {"patch"},                   // the status
	"apiextensions.k8s.io/customresourcedefinitions": {"list", "watch"},           // a pool kind installed later
	"events.k8s.io/events":                           {"create", "patch"},         // events
	"coordination.k8s.io/leases":                     {"create", "get", "update"}, // leader election
	"apps/daemonsets":                                readVerbs,                   // which Cilium runs (L2 nudge)
}

// notKindsRead: what renumber-reader reads beyond the backends.
var notKindsRead = map[string][]string{
	"/nodes": readVerbs, "/services": readVerbs, "dynamic-prefix.io/dynamicprefixes": readVerbs,
	"apiextensions.k8s.io/customresourcedefinitions": {"list", "watch"},
	"coordination.k8s.io/leases":                     readVerbs,
	"apps/deployments":                               {"get"},
}

// A Kind's needs are granted to the writer (its ClusterRole, or the Role of
// the one object it names) and to renumber-reader, and nothing more is
// granted to either than the Kinds and the writer's other stages declare.
func TestRBACGrantsWhatTheKindsDeclare(t *testing.T) {
	for i := range writerRBAC {
		checkGrants(t, "writer", writerRBAC[i], grants(t, "writer", writerRBAC[i], kubeVIPRBAC), func(a Access) []string { return a.Writer }, notKinds)
		checkGrants(t, "reader", readerRBAC[i], grants(t, "reader", readerRBAC[i]), func(a Access) []string { return a.Reader }, notKindsRead)
	}
}

// grant is what RBAC grants on one resource: verbs, and the objects they are
// narrowed to ("namespace/name"; none: every object).
type grant struct {
	verbs   []string
	cluster []string // those of verbs a ClusterRole grants: on every namespace
	only    []string
}

func checkGrants(t *testing.T, who, file string, got map[string]grant, need func(Access) []string, others map[string][]string) {
	t.Helper()
	declared := map[string][]string{}
	for r, verbs := range others {
		declared[r] = verbs
	}
	for _, a := range Declared() {
		r := a.Group + "/" + a.Resource
		declared[r] = append(declared[r], need(a)...)
		g := got[r]
		if a.Only != "" && len(g.only) > 0 && !slices.Contains(g.only, a.Only) {
			t.Errorf("%s: %s: the %s's RBAC narrows %s to %v, not to %s", file, a.Name, who, r, g.only, a.Only)
		}
		if a.Only == "" && len(g.only) > 0 {
			t.Errorf("%s: %s: the %s's RBAC grants %s only on %v; the kind follows every object", file, a.Name, who, r, g.only)
		}
		for _, v := range need(a) {
			if a.Only == "" && slices.Contains(g.verbs, v) && !slices.Contains(g.cluster, v) {
				t.Errorf("%s: %s: the %s's RBAC grants %q on %s only in a Role; the kind follows every namespace", file, a.Name, who, v, r)
			}
			if !slices.Contains(g.verbs, v) {
				t.Errorf("%s: %s: the %s's RBAC does not grant %q on %s (apiGroups [%q], resources [%q])", file, a.Name, who, v, r, a.Group, a.Resource)
			}
		}
	}
	for r, g := range got {
		for _, v := range g.verbs {
			if !slices.Contains(declared[r], v) {
				t.Errorf("%s: the %s's RBAC grants %q on %s, which no Kind and no other stage of the writer declares", file, who, v, r)
			}
		}
	}
}

// grants reads the rules of who's Roles and ClusterRoles in the files
// (renumber-<who>...), as "group/resource" -> grant.
func grants(t *testing.T, who string, files ...string) map[string]grant {
	t.Helper()
	out := map[string]grant{}
	for _, doc := range docs(t, files...) {
		if doc.Kind != "Role" && doc.Kind != "ClusterRole" || !strings.HasPrefix(doc.Metadata.Name, "renumber-"+who) {
			continue
		}
		for _, r := range doc.Rules {
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					g := out[group+"/"+res]
					g.verbs = append(g.verbs, r.Verbs...)
					if doc.Kind == "ClusterRole" {
						g.cluster = append(g.cluster, r.Verbs...)
					}
					for _, name := range r.ResourceNames {
						g.only = append(g.only, doc.Metadata.Namespace+"/"+name)
					}
					out[group+"/"+res] = g
				}
			}
		}
	}
	return out
}

// Every write the writer makes to an object another owns is held by an
// admission policy: each pool kind is matched, on UPDATE, by the field policy
// of its kind, by renumber-writer-sizes and by renumber-writer-values; each
// write of the objects it owns (create, patch, delete) by a field policy.
func TestThePoliciesMatchEveryKind(t *testing.T) {
	for i := range policies {
		checkPolicies(t, policies[i], valuePolicies[i])
	}
}

// checkPolicies checks the policies in files, named by the first.
func checkPolicies(t *testing.T, files ...string) {
	t.Helper()
	matched := matches(t, files...)
	for _, a := range Declared() {
		r := a.Group + "/" + a.Resource
		for _, v := range a.Writer {
			op := map[string]string{"create": "CREATE", "patch": "UPDATE", "update": "UPDATE", "delete": "DELETE"}[v]
			if op == "" {
				continue
			}
			field := slices.DeleteFunc(slices.Clone(matched[r+" "+op]), func(p string) bool {
				return p == "renumber-writer-sizes" || p == "renumber-writer-values"
			})
			if len(field) == 0 {
				t.Errorf("%s: no field policy in %s matches %s of %s", a.Name, files[0], op, r)
			}
		}
		if !a.Pool {
			continue
		}
		for _, p := range []string{"renumber-writer-sizes", "renumber-writer-values"} {
			if !slices.Contains(matched[r+" UPDATE"], p) {
				t.Errorf("%s: %s: %s does not match UPDATE of %s (its matchConstraints.resourceRules)", files[0], a.Name, p, r)
			}
		}
	}
}

// matches reads which ValidatingAdmissionPolicies match each "group/resource
// OPERATION".
func matches(t *testing.T, files ...string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, doc := range docs(t, files...) {
		if doc.Kind != "ValidatingAdmissionPolicy" {
			continue
		}
		for _, r := range doc.Spec.MatchConstraints.ResourceRules {
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					for _, op := range r.Operations {
						key := fmt.Sprintf("%s/%s %s", group, res, op)
						out[key] = append(out[key], doc.Metadata.Name)
					}
				}
			}
		}
	}
	return out
}

// doc is the part of a manifest the checks read.
type doc struct {
	Kind     string
	Metadata struct{ Name, Namespace string }
	Rules    []struct {
		APIGroups     []string `json:"apiGroups"`
		Resources     []string
		ResourceNames []string `json:"resourceNames"`
		Verbs         []string
	}
	Spec struct {
		MatchConstraints struct {
			ResourceRules []struct {
				APIGroups  []string `json:"apiGroups"`
				Resources  []string
				Operations []string
			} `json:"resourceRules"`
		} `json:"matchConstraints"`
	}
}

// docs reads the manifests in files (from the repository's root; "helm
// template" for the chart as Helm renders it, rendered).
func docs(t *testing.T, files ...string) []doc {
	t.Helper()
	var out []doc
	for _, f := range files {
		b := renderedChart
		if f != helmTemplate {
			var err error
			if b, err = os.ReadFile(filepath.Join("..", "..", "..", f)); err != nil {
				t.Fatal(err)
			}
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var d doc
			if err := dec.Decode(&d); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		t.Fatalf("nothing read from %s", strings.Join(files, ", "))
	}
	return out
}

// helmTemplate names the chart as Helm renders it with kube-vip's ConfigMap
// named (its Role is a template, not a copy of manifests/): renderedChart, once
// renderChart has run.
const helmTemplate = "helm template"

var renderedChart []byte

// renderChart renders the chart with the pinned Helm (make helm), or skips
// outside CI when it is not built.
func renderChart(t *testing.T) {
	t.Helper()
	root := filepath.Join("..", "..", "..")
	helm := filepath.Join(root, "_out", "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("helm missing in CI: make test builds it (make helm)")
		}
		t.Skip("helm not built (make helm)")
	}
	out, err := exec.Command(helm, "template", "renumber", filepath.Join(root, "charts", "renumber"), "-n", "renumber-system",
		"--kube-version", "1.35.0", "--set", "kubeVIP.configMap="+DefaultKubeVIPConfigMap).Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	renderedChart = out
}

// The chart as Helm renders it grants and matches what manifests/ does.
func TestTheRenderedChartGrantsWhatTheKindsDeclare(t *testing.T) {
	renderChart(t)
	checkGrants(t, "writer", helmTemplate, grants(t, "writer", helmTemplate), func(a Access) []string { return a.Writer }, notKinds)
	checkGrants(t, "reader", helmTemplate, grants(t, "reader", helmTemplate), func(a Access) []string { return a.Reader }, notKindsRead)
	checkPolicies(t, helmTemplate, helmTemplate)
}

// Discover finds every kind Declared names where the API server serves them
// all: the two read one list.
func TestDiscoverFindsEveryDeclaredKind(t *testing.T) {
	var all servedList = map[string][]string{}
	for _, a := range Declared() {
		for _, v := range []string{"v1", "v1beta1", "v2"} {
			all[a.Group+"/"+v] = append(all[a.Group+"/"+v], a.Resource)
		}
	}
	served, err := Discover(all, DefaultKubeVIPConfigMap)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, k := range served.Pools {
		found = append(found, k.Name)
	}
	for _, a := range Declared() {
		if a.Resource != CalicoResource && a.Resource != bgpResourceName && !slices.Contains(found, a.Name) {
			t.Errorf("%s is declared and not discovered (found %v)", a.Name, found)
		}
	}
	// The kinds the writer creates, from the same answers.
	for _, gvr := range []schema.GroupVersionResource{served.Calico, served.BGP} {
		if !slices.ContainsFunc(Declared(), func(a Access) bool { return a.Group == gvr.Group && a.Resource == gvr.Resource }) {
			t.Errorf("discovered %v, which is not declared", gvr)
		}
	}
}

// TestDiscoverAsksEachGroupOnce: one discovery finds the pool kinds, the
// IPPools and the advertisements, asking each version of each group once.
func TestDiscoverAsksEachGroupOnce(t *testing.T) {
	asked := counting{servedList: servedList{
		"cilium.io/v2":             {PoolResource, "ciliumcidrgroups", bgpResourceName},
		"crd.projectcalico.org/v1": {CalicoResource, NetworkSetResource},
	}, asked: map[string]int{}}
	served, err := Discover(asked, "")
	if err != nil {
		t.Fatal(err)
	}
	if served.BGP.Resource != bgpResourceName || served.Calico.Resource != CalicoResource {
		t.Errorf("advertisements %v, IPPools %v: want both served", served.BGP, served.Calico)
	}
	for gv, n := range asked.asked {
		if n != 1 {
			t.Errorf("%s asked %d times, want once", gv, n)
		}
	}
}

// counting is a servedList that counts the questions asked of it.
type counting struct {
	servedList
	asked map[string]int
}

func (c counting) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	c.asked[gv]++
	return c.servedList.ServerResourcesForGroupVersion(gv)
}
