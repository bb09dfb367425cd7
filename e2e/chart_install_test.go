package e2e

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/renumber/renumber/tools/world"
)

// chartCase is a values file and what the cluster has before the install.
type chartCase struct {
	values  string
	prepare func(t *testing.T, w *world.World)
}

// chartCases are the value files a user is likely to install with.
var chartCases = map[string]chartCase{
	"defaults": {},
	"every option on": {values: everything, prepare: func(t *testing.T, w *world.World) {
		kubeVIPConfigMap(t, w)
		if err := w.API.InstallPrometheusOperator(t.Context()); err != nil {
			t.Fatal(err)
		}
	}},
	"shadow without reader":    {values: "reader: {enabled: false}\nshadow: {enabled: true}\n"},
	"shadow and kube-vip":      {values: "shadow: {enabled: true}\nkubeVIP: {configMap: kube-system/kubevip}\n", prepare: kubeVIPConfigMap},
	"another Cilium namespace": {values: "writer: {ciliumNamespace: cilium}\nshadow: {enabled: true}\n", prepare: ciliumIn("cilium")},
	"one node":                 {values: "writer: {replicas: 1}\n"},
	"own ServiceAccounts": {values: "agent: {serviceAccount: {name: home-agent, annotations: {team: net}}}\n" +
		"writer: {serviceAccount: {create: false, name: byo-writer}}\nshadow: {enabled: true, serviceAccount: {name: home-shadow}}\n",
		prepare: func(t *testing.T, w *world.World) {
			if _, err := w.API.Client.CoreV1().Namespaces().Create(t.Context(),
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: world.Namespace}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.API.Client.CoreV1().ServiceAccounts(world.Namespace).Create(t.Context(),
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "byo-writer"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
}

// TestEveryChartOptionInstallsAndItsRBACServes: each value file of
// chartCases is installed with `helm install` on the real API server, then
// the real binaries run as the identities the release binds, with the
// arguments its Deployment and DaemonSet give them: the agent and the writer
// bring a DynamicPrefix's pool to the advertised prefix, a shadow serves its
// plan, `kubectl renumber status` reads as a renumber-reader, and no log
// says forbidden.
func TestEveryChartOptionInstallsAndItsRBACServes(t *testing.T) {
	t.Parallel() // its subtests start worlds: among the other world tests, not before them
	_, repo := helmBin(t)
	for name, c := range chartCases {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			w := bareWorldWith(t, 1)
			if err := w.API.InstallCiliumCRDs(t.Context()); err != nil {
				t.Fatal(err)
			}
			if c.prepare != nil {
				c.prepare(t, w)
			}
			values := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(values, []byte(c.values), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := installRenumber(t, w, filepath.Join(repo, "charts", "renumber"), "-f", values); err != nil {
				t.Fatalf("helm install: %v\n%s", err, out)
			}
			manifest, err := helmIn(t, w, "get", "manifest", "renumber", "-n", world.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			objs := objects(t, []byte(manifest))
			ctx := t.Context()

			agent, writer := objs["DaemonSet "+world.Namespace+"/renumber-agent"], objs["Deployment "+world.Namespace+"/renumber-writer"]
			if _, err := w.StartAgentAs(ctx, podServiceAccount(agent), filepath.Join(binaries(t), "agent"), "node1", localArgs(t, agent)...); err != nil {
				t.Fatal(err)
			}
			if _, err := w.StartWriterAs(ctx, podServiceAccount(writer), filepath.Join(binaries(t), "writer"), "writer-0", localArgs(t, writer)...); err != nil {
				t.Fatal(err)
			}
			logs := []string{"agent-node1.log", "writer-0.log"}
			if shadow := objs["Deployment "+world.Namespace+"/renumber-shadow"]; shadow != nil {
				addr := freeAddr(t)
				if _, err := w.StartWriterAs(ctx, podServiceAccount(shadow), filepath.Join(binaries(t), "writer"), "shadow-0",
					append(localArgs(t, shadow), "--metrics-addr", addr)...); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the shadow serves its plan", func() (bool, string) {
					_, err := planOf(addr)
					return err == nil, errString(err)
				})
				logs = append(logs, "shadow-0.log")
			}
			minimalDP(t, w, "home")
			createPool(t, w)
			prefix := netip.MustParsePrefix("2001:db8:7::/64")
			advertise(t, w, prefix)
			poolIs(t, w, "the pool follows the advertised prefix", prefix.String())
			if objs["ClusterRole /renumber-reader"] != nil {
				// As a renumber-reader, deciding with the installed writer's arguments.
				out, err := exec.Command(filepath.Join(binaries(t), "kubectl-renumber"), "status", "--kubeconfig", statusIdentity(t, w).Kubeconfig).CombinedOutput()
				var exit *exec.ExitError
				if (err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 3)) || strings.Contains(string(out), "default flags") || !strings.Contains(string(out), "home") {
					t.Errorf("kubectl renumber status as a reader: %v\n%s", err, out)
				}
			}
			noForbidden(t, w, logs...)
		})
	}
}

// noForbidden fails t for each line of the world's logs that says a request
// was forbidden (RBAC the release lacks).
func noForbidden(t *testing.T, w *world.World, logs ...string) {
	t.Helper()
	for _, l := range logs {
		b, err := os.ReadFile(filepath.Join(w.Dir, l))
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`(?i).*forbidden.*`).Find(b); m != nil {
			t.Errorf("%s: %s", l, m)
		}
	}
}

// podServiceAccount is the ServiceAccount a rendered DaemonSet's or
// Deployment's Pods run as.
func podServiceAccount(o map[string]any) string {
	sa, _, _ := unstructured.NestedString(o, "spec", "template", "spec", "serviceAccountName")
	return sa
}

// localArgs are the container arguments of a rendered DaemonSet or
// Deployment, but those naming the Pod's interface and metrics listener and
// its guard (the world gives each process its own listener, read over plain
// HTTP; TestRealNodesMetricsAreScrapedOnlyWithAToken tries the guard on real Pods).
func localArgs(t *testing.T, o map[string]any) []string {
	t.Helper()
	if o == nil {
		t.Fatal("not rendered")
	}
	cs, _, _ := unstructured.NestedSlice(o, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--metrics-") && !strings.HasPrefix(a, "--interface") {
			out = append(out, a)
		}
	}
	return out
}

// bareWorldWith is bareWorld with nodes node namespaces (their Node objects
// included).
func bareWorldWith(t *testing.T, nodes int) *world.World {
	t.Helper()
	skipWithoutWorld(t)
	helmBin(t)
	return startWorld(t, world.Options{Nodes: nodes})
}

// kubeVIPConfigMap is the kube-vip cloud provider's pool ConfigMap.
func kubeVIPConfigMap(t *testing.T, w *world.World) {
	t.Helper()
	if _, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevip", Namespace: "kube-system"},
		Data:       map[string]string{"cidr-global": "192.0.2.0/24"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ciliumIn is a cluster whose Cilium DaemonSet runs in namespace ns.
func ciliumIn(ns string) func(t *testing.T, w *world.World) {
	return func(t *testing.T, w *world.World) {
		t.Helper()
		cs := w.API.Client
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{"k8s-app": "cilium"}
		if _, err := cs.AppsV1().DaemonSets(ns).Create(t.Context(), &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "cilium", Namespace: ns, Labels: labels},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cilium-agent", Image: "quay.io/cilium/cilium:v1.18.2"}}}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAReleaseScopesItsNames: a release not named renumber ("home") names
// every object home-renumber-*, and everything that refers to one follows:
// role bindings, policy bindings, the Pods' ServiceAccounts, the admission
// policies' identities, the writer's Lease. The real agent, writer and shadow
// run as the release's identities with its arguments and bring the pool to
// the prefix; the agent's policy holds for its identity.
func TestAReleaseScopesItsNames(t *testing.T) {
	_, repo := helmBin(t)
	w := bareWorldWith(t, 1)
	ctx := t.Context()
	if err := w.API.InstallCiliumCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	args := []string{"install", "home", filepath.Join(repo, "charts", "renumber"), "-n", world.Namespace, "--create-namespace", "--set", "shadow.enabled=true"}
	for _, s := range world.LocalImages {
		args = append(args, "--set", s)
	}
	if out, err := helmIn(t, w, args...); err != nil {
		t.Fatalf("helm install home: %v\n%s", err, out)
	}
	manifest, err := helmIn(t, w, "get", "manifest", "home", "-n", world.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, []byte(manifest))
	names := map[string]bool{}
	for k := range objs {
		kind, name, _ := strings.Cut(k, " ")
		_, name, _ = strings.Cut(name, "/")
		names[kind+"/"+name] = true
		if kind != "CustomResourceDefinition" && !strings.HasPrefix(name, "home-renumber-") {
			t.Errorf("%s is not named for the release", k)
		}
	}
	refers := func(from, kind, name string) {
		if !names[kind+"/"+name] {
			t.Errorf("%s refers to %s %s, which the release does not have", from, kind, name)
		}
	}
	for k, o := range objs {
		u := unstructured.Unstructured{Object: o}
		switch u.GetKind() {
		case "RoleBinding", "ClusterRoleBinding":
			ref, _, _ := unstructured.NestedStringMap(o, "roleRef")
			refers(k, ref["kind"], ref["name"])
			subjects, _, _ := unstructured.NestedSlice(o, "subjects")
			for _, s := range subjects {
				refers(k, "ServiceAccount", s.(map[string]any)["name"].(string))
			}
		case "ValidatingAdmissionPolicyBinding":
			p, _, _ := unstructured.NestedString(o, "spec", "policyName")
			refers(k, "ValidatingAdmissionPolicy", p)
		case "ValidatingAdmissionPolicy":
			conds, _, _ := unstructured.NestedSlice(o, "spec", "matchConditions")
			for _, c := range conds {
				e := c.(map[string]any)["expression"].(string)
				if m := regexp.MustCompile(`system:serviceaccount:[^:]+:([^']+)'`).FindStringSubmatch(e); m != nil {
					refers(k, "ServiceAccount", m[1])
				}
			}
		case "Deployment", "DaemonSet":
			sa, _, _ := unstructured.NestedString(o, "spec", "template", "spec", "serviceAccountName")
			refers(k, "ServiceAccount", sa)
		}
	}

	if _, err := w.StartAgentAs(ctx, "home-renumber-agent", filepath.Join(binaries(t), "agent"), "node1",
		localArgs(t, objs["DaemonSet "+world.Namespace+"/home-renumber-agent"])...); err != nil {
		t.Fatal(err)
	}
	writerArgs := localArgs(t, objs["Deployment "+world.Namespace+"/home-renumber-writer"])
	if !slices.Contains(writerArgs, "--lease-name=home-renumber-writer") {
		t.Errorf("writer args %q: no --lease-name=home-renumber-writer", writerArgs)
	}
	if _, err := w.StartWriterAs(ctx, "home-renumber-writer", filepath.Join(binaries(t), "writer"), "writer-0", writerArgs...); err != nil {
		t.Fatal(err)
	}
	if _, err := w.StartWriterAs(ctx, "home-renumber-shadow", filepath.Join(binaries(t), "writer"), "shadow-0",
		append(localArgs(t, objs["Deployment "+world.Namespace+"/home-renumber-shadow"]), "--metrics-addr", freeAddr(t))...); err != nil {
		t.Fatal(err)
	}
	minimalDP(t, w, "home")
	createPool(t, w)
	prefix := netip.MustParsePrefix("2001:db8:8::/64")
	advertise(t, w, prefix)
	poolIs(t, w, "the pool follows the advertised prefix", prefix.String())
	eventually(t, "the writer holds the release's Lease", func() (bool, string) {
		l, err := w.API.Client.CoordinationV1().Leases(world.Namespace).Get(ctx, "home-renumber-writer", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "writer-0", fmt.Sprint(l.Spec.HolderIdentity)
	})

	// The agent's policy binds the release's agent identity.
	if err := w.API.CreateNode(ctx, "node2"); err != nil {
		t.Fatal(err)
	}
	id, err := w.API.ServiceAccount(ctx, "home-renumber-agent", "node1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.NewForConfigOrDie(id.Config).CoreV1().Nodes().Patch(ctx, "node2", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"dynamic-prefix.io/node-prefixes":"v1;eth0="}}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Errorf("the release's agent wrote another node's digest: %v", err)
	}
	noForbidden(t, w, "agent-node1.log", "writer-0.log", "shadow-0.log")
}
