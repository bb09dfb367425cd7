package e2e

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/tools/world"
)

// helmBin is the pinned Helm (make helm); the chart tests skip without it
// outside CI.
func helmBin(t *testing.T) (helm, repo string) {
	t.Helper()
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm = filepath.Join(repo, "_out", "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("helm missing in CI: make test builds it (make helm)")
		}
		t.Skip("helm not built (make helm)")
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	return helm, repo
}

// helmTemplate runs helm template on the chart with values (YAML) and returns the
// objects, CRDs included.
func helmTemplate(t *testing.T, helm, repo, values string) ([]byte, error) {
	t.Helper()
	return helmTemplateOf(t, helm, filepath.Join(repo, "charts", "renumber"), values)
}

// helmTemplateOf is helmTemplate of the chart in dir.
func helmTemplateOf(t *testing.T, helm, dir, values string) ([]byte, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helm, "template", "renumber", dir, "-n", world.Namespace,
		"--kube-version", "1.35.0", "--include-crds", "-f", f)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

// TestTheChartNeedsNoSymbolicLinks: a copy of charts/renumber made as a tool
// that does not follow symbolic links makes one (Flux's GitRepository
// skips them) renders the same objects as the chart in the repository.
func TestTheChartNeedsNoSymbolicLinks(t *testing.T) {
	helm, repo := helmBin(t)
	src := filepath.Join(repo, "charts", "renumber")
	dst := filepath.Join(t.TempDir(), "renumber")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			t.Errorf("%s is a symbolic link: a Git checkout without them lacks it", rel)
			return nil
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	values := "agent: {interface: eth0}\nmonitoring: {podMonitor: {enabled: true}, prometheusRule: {enabled: true}, dashboard: {enabled: true}}\nreader: {enabled: true}\nshadow: {enabled: true}\n"
	want, err := helmTemplateOf(t, helm, src, values)
	if err != nil {
		t.Fatal(err)
	}
	got, err := helmTemplateOf(t, helm, dst, values)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := withoutCA(got), withoutCA(want); !bytes.Equal(got, want) {
		t.Errorf("the copy renders %d bytes, the chart %d", len(got), len(want))
	}
}

// caData is the metrics CA's keys and certificate in a rendering: `helm
// template` has no cluster to find the CA in, and makes a new one each time.
var caData = regexp.MustCompile(`(?m)^(\s+(?:tls\.crt|tls\.key|ca\.crt): ).*$`)

// withoutCA is a rendering with the metrics CA's data left out.
func withoutCA(b []byte) []byte { return caData.ReplaceAll(b, []byte("${1}...")) }

// objects splits a YAML stream into objects by "Kind namespace/name".
func objects(t *testing.T, stream []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		var o map[string]any
		if err := dec.Decode(&o); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if o == nil {
			continue
		}
		u := unstructured.Unstructured{Object: o}
		out[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = o
	}
	return out
}

// TestChartRendersTheManifests: with its defaults the chart renders exactly the
// objects of `kubectl apply -k manifests/` (but the Namespace, which Helm
// users create), field for field - so the security properties, RBAC verbs,
// admission policies and arguments are the same; `helm lint --strict` passes
// with the defaults and with every option on; the values schema refuses a
// wrong type and an unknown key.
func TestChartRendersTheManifests(t *testing.T) {
	helm, repo := helmBin(t)
	chart := filepath.Join(repo, "charts", "renumber")
	kust, err := exec.Command("kubectl", "kustomize", filepath.Join(repo, "manifests")).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := objects(t, kust)
	delete(want, "Namespace /"+world.Namespace)
	// The install's metrics CA: the chart makes it (genCA); kustomize cannot
	// make a key, and the manifests mount its Secret as optional
	// (docs/operating.md says how to make it).
	metricsCA := []string{"Secret " + world.Namespace + "/renumber-metrics-ca", "ConfigMap " + world.Namespace + "/renumber-metrics-ca"}
	// The manifests' images (the release's install.yaml rewrites them); the
	// chart's defaults are the release's own: TestThePackagedChartPullsWhatTheReleasePushes.
	out, err := helmTemplate(t, helm, repo, localImages)
	if err != nil {
		t.Fatal(err)
	}
	got := objects(t, out)
	for k, o := range got {
		if d := chartLabels(o); len(d) > 0 {
			t.Errorf("%s lacks the chart's standard labels: %v", k, d)
		}
	}
	for _, k := range metricsCA {
		if _, ok := got[k]; !ok {
			t.Errorf("the chart lacks %s", k)
		}
		delete(got, k)
	}
	sameObjects(t, got, want)

	for name, values := range map[string]string{"defaults": "", "everything on": everything} {
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(helm, "lint", "--strict", "--kube-version", "1.35.0", chart, "-f", f).CombinedOutput(); err != nil {
			t.Errorf("helm lint --strict (%s): %v\n%s", name, err, out)
		}
	}
	for name, values := range map[string]string{
		"a wrong type":   "writer: {replicas: two}\n",
		"an unknown key": "writer: {replica: 2}\n",
		"a bad l2Nudge":  "writer: {l2Nudge: sometimes}\n",
	} {
		if _, err := helmTemplate(t, helm, repo, values); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s: rendered (%v), want refused by values.schema.json", name, err)
		}
	}
}

// sameObjects reports each object of want (manifests/) the chart's got
// lacks or renders otherwise, and each it renders that want has not.
func sameObjects(t *testing.T, got, want map[string]map[string]any) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			t.Errorf("the chart lacks %s", k)
			continue
		}
		if d := differences("", g, want[k]); len(d) > 0 {
			t.Errorf("%s differs from manifests/ (chart vs manifests):\n%s", k, strings.Join(d, "\n"))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart renders %s, which manifests/ does not have", k)
		}
	}
}

// helmLabels are the labels the chart adds to every object (a Helm chart's
// standard labels), the one difference from manifests/ besides the CRD's keep
// policy.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version"}

// chartLabels removes the chart's own labels and annotations from o (which
// manifests/ does not carry), and returns those of them o lacks.
func chartLabels(o map[string]any) (missing []string) {
	u := unstructured.Unstructured{Object: o}
	labels := u.GetLabels()
	for _, l := range helmLabels {
		if labels[l] == "" {
			missing = append(missing, l)
		}
		delete(labels, l)
	}
	u.SetLabels(labels)
	if a := u.GetAnnotations(); u.GetKind() == "CustomResourceDefinition" {
		if a["helm.sh/resource-policy"] != "keep" {
			missing = append(missing, "helm.sh/resource-policy: keep")
		}
		delete(a, "helm.sh/resource-policy")
		if len(a) == 0 {
			a = nil
		}
		u.SetAnnotations(a)
	}
	return missing
}

// differences lists the paths where a and b differ, with both values.
func differences(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(am)) {
			out = append(out, differences(path+"."+k, am[k], bm[k])...)
		}
		for _, k := range slices.Sorted(maps.Keys(bm)) {
			if _, ok := am[k]; !ok {
				out = append(out, differences(path+"."+k, nil, bm[k])...)
			}
		}
		return out
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		var out []string
		for i := range as {
			out = append(out, differences(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	return []string{fmt.Sprintf("  %s: %v vs %v", path, a, b)}
}

// localImages are the values naming the images manifests/ names.
const localImages = "agent: {image: {repository: renumber/agent, tag: dev}}\nwriter: {image: {repository: renumber/writer, tag: dev}}\n"

// everything switches every option of the chart on.
const everything = `
agent:
  interface: enp1s0
  metricsOnNode: true
  debounce: 200ms
  publishBurst: 5
  keepOmittedPrefixes: true
  corroboration: 3s
  conflictHold: 5m
  conflictBound: 2m
  metricsAudience: ""
  logLevel: debug
  extraArgs: [--startup-grace=10s]
  affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: {matchExpressions: [{key: zone, operator: Exists}]}}]}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 2}}
  podSecurityContext: {fsGroup: 65532}
  securityContext: {privileged: false}
writer:
  podSecurityContext: {fsGroup: 65532}
  securityContext: {runAsNonRoot: true}
  replicas: 3
  budget: {objectBurst: 3, totalPerMinute: 30}
  externalDNSTargetKeys: [external-dns.kubernetes.io/target]
  l2Nudge: never
  logFormat: json
  metricsAudience: renumber-metrics
  dhcpv6ConfirmWithin: 5m
kubeVIP: {configMap: kube-system/kubevip}
shadow: {enabled: true}
monitoring:
  prometheusRule: {enabled: true, labels: {release: prom}}
  podMonitor: {enabled: true}
  dashboard: {enabled: true}
`

// TestChartIsAcceptedByTheAPIServer: the chart with every option on, applied to
// the real API server (the Prometheus Operator's kinds excepted: their CRDs are
// not in the world), and its writer arguments are the ones the values ask for.
func TestChartIsAcceptedByTheAPIServer(t *testing.T) {
	helm, repo := helmBin(t)
	w := newWorld(t, 0)
	out, err := helmTemplate(t, helm, repo, everything)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	var apply bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(objs)) {
		if strings.HasPrefix(k, "PrometheusRule ") || strings.HasPrefix(k, "PodMonitor ") {
			continue
		}
		b, err := yaml.Marshal(objs[k])
		if err != nil {
			t.Fatal(err)
		}
		apply.WriteString("---\n")
		apply.Write(b)
	}
	for _, k := range []string{"PrometheusRule renumber-system/renumber", "PodMonitor renumber-system/renumber-writer",
		"ConfigMap renumber-system/renumber-dashboard", "Deployment renumber-system/renumber-shadow", "Role kube-system/renumber-writer-kube-vip"} {
		if objs[k] == nil {
			t.Errorf("everything on: %s not rendered", k)
		}
	}
	if err := w.API.ApplyYAML(t.Context(), apply.Bytes()); err != nil {
		t.Fatalf("the API server refuses the chart: %v", err)
	}
	args := func(k string) []string {
		u := unstructured.Unstructured{Object: objs[k]}
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		a, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
		return a
	}
	for k, want := range map[string][]string{
		"Deployment renumber-system/renumber-writer": {"--budget-object-burst=3", "--budget-total-per-minute=30",
			"--external-dns-target-annotation-keys=external-dns.kubernetes.io/target", "--l2-nudge=never",
			"--kube-vip-configmap=kube-system/kubevip", "--log-format=json", "--metrics-audience=renumber-metrics", "--dhcpv6-confirm-within=5m"},
		"Deployment renumber-system/renumber-shadow": {"--dry-run", "--l2-nudge=never", "--metrics-audience=renumber-metrics"},
		"DaemonSet renumber-system/renumber-agent":   {"--interface=enp1s0", "--metrics-addr=node:9470", "--debounce=200ms", "--publish-burst=5", "--keep-omitted-prefixes", "--corroboration=3s", "--conflict-hold=5m", "--conflict-bound=2m", "--metrics-audience=", "--startup-grace=10s"},
	} {
		got := args(k)
		for _, a := range want {
			if !slices.Contains(got, a) {
				t.Errorf("%s: args %q lack %q", k, got, a)
			}
		}
	}
}

// TestThePackagedChartPullsWhatTheReleasePushes: the chart as the release
// workflow packages it (helm package --version V --app-version V) renders
// the images that workflow pushes, ghcr.io/<owner>/renumber-<name>:V for the
// repository's owner, renumber - read from .github/workflows/release.yml, not
// restated here.
func TestThePackagedChartPullsWhatTheReleasePushes(t *testing.T) {
	helm, repo := helmBin(t)
	wf, err := os.ReadFile(filepath.Join(repo, ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	registry := regexp.MustCompile(`REGISTRY: (.+)`).FindSubmatch(wf)
	ref := regexp.MustCompile(`ref="(\$REGISTRY/[^"]+)"`).FindSubmatch(wf)
	if registry == nil || ref == nil {
		t.Fatalf("release.yml names no REGISTRY or pushed ref")
	}
	pushed := func(name string) string {
		r := strings.NewReplacer("$REGISTRY", strings.ReplaceAll(string(registry[1]), "${{ github.repository_owner }}", "renumber"),
			"$name", name, "$version", "1.2.3")
		return r.Replace(string(ref[1]))
	}
	dir := t.TempDir()
	if out, err := exec.Command(helm, "package", filepath.Join(repo, "charts", "renumber"), "--version", "1.2.3", "--app-version", "1.2.3", "-d", dir).CombinedOutput(); err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	out, err := exec.Command(helm, "template", "renumber", filepath.Join(dir, "renumber-1.2.3.tgz"), "-n", world.Namespace,
		"--kube-version", "1.35.0", "--set", "shadow.enabled=true").Output()
	if err != nil {
		t.Fatal(err)
	}
	for k, name := range map[string]string{"DaemonSet renumber-system/renumber-agent": "agent",
		"Deployment renumber-system/renumber-writer": "writer", "Deployment renumber-system/renumber-shadow": "writer"} {
		o := objects(t, out)[k]
		cs, _, _ := unstructured.NestedSlice(o, "spec", "template", "spec", "containers")
		if len(cs) == 0 {
			t.Errorf("%s: not rendered", k)
			continue
		}
		if got, want := cs[0].(map[string]any)["image"], pushed(name); got != want {
			t.Errorf("%s pulls %v, the release pushes %s", k, got, want)
		}
	}
	// A global section (an umbrella chart's) is accepted.
	if _, err := helmTemplate(t, helm, repo, "global: {imageRegistry: registry.example.org}\n"); err != nil {
		t.Errorf("global refused: %v", err)
	}
}

// TestChartOptionsRenderWholeRBAC: options that move or drop objects keep
// the RBAC they need: the Cilium Role follows writer.ciliumNamespace; the
// shadow, which binds the reader role, renders it without reader.enabled.
func TestChartOptionsRenderWholeRBAC(t *testing.T) {
	helm, repo := helmBin(t)
	out, err := helmTemplate(t, helm, repo, "writer: {ciliumNamespace: cilium}\nreader: {enabled: false}\nshadow: {enabled: true}\n")
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	for _, k := range []string{"Role cilium/renumber-writer-cilium", "RoleBinding cilium/renumber-writer-cilium",
		"RoleBinding cilium/renumber-shadow-cilium", "ClusterRole /renumber-reader"} {
		if objs[k] == nil {
			t.Errorf("%s not rendered", k)
		}
	}
	for k := range objs {
		if strings.Contains(k, " kube-system/") {
			t.Errorf("%s rendered in kube-system, Cilium runs in cilium", k)
		}
	}
}

// TestChartTakesTheConventionalKnobs: what charts of this ecosystem accept
// (an umbrella chart's global registry and pull secrets, pull secrets, Pod
// labels and annotations, extra env, security contexts, the agent's affinity
// and update strategy, the writer's priority class, affinity and spread)
// renders where it belongs, and helm lint --strict passes with them.
func TestChartTakesTheConventionalKnobs(t *testing.T) {
	helm, repo := helmBin(t)
	values := `
global: {imageRegistry: registry.example.org:5000, imagePullSecrets: [global-cred, {name: mirror}]}
imagePullSecrets: [{name: mirror}]
agent:
  podLabels: {team: net}
  podAnnotations: {note: agent}
  extraEnv: [{name: TZ, value: UTC}]
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: Exists}]}]}}}
  updateStrategy: {type: OnDelete}
  podSecurityContext: {fsGroup: 65532}
  securityContext: {readOnlyRootFilesystem: false}
writer:
  podSecurityContext: {runAsUser: 1000}
  securityContext: {capabilities: {drop: [ALL, NET_RAW]}}
  podLabels: {team: net}
  podAnnotations: {note: writer}
  extraEnv: [{name: TZ, value: UTC}]
  priorityClassName: high
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: x, operator: Exists}]}]}}}
  topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}]
`
	out, err := helmTemplate(t, helm, repo, values)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	for k, name := range map[string]string{"DaemonSet renumber-system/renumber-agent": "agent", "Deployment renumber-system/renumber-writer": "writer"} {
		pod, _, _ := unstructured.NestedMap(objs[k], "spec", "template")
		md, _ := pod["metadata"].(map[string]any)
		spec, _ := pod["spec"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		annotations, _ := md["annotations"].(map[string]any)
		if labels["team"] != "net" || labels["app.kubernetes.io/name"] != "renumber-"+name || annotations["note"] != name {
			t.Errorf("%s: Pod metadata %v", k, md)
		}
		if fmt.Sprint(spec["imagePullSecrets"]) != "[map[name:mirror] map[name:global-cred]]" {
			t.Errorf("%s: imagePullSecrets %v (want the chart's, then global's, each once)", k, spec["imagePullSecrets"])
		}
		container := spec["containers"].([]any)[0].(map[string]any)
		if want := "registry.example.org:5000/renumber/renumber-" + name + ":"; !strings.HasPrefix(fmt.Sprint(container["image"]), want) {
			t.Errorf("%s: image %v, want %s...", k, container["image"], want)
		}
		podSC, ctr := fmt.Sprint(spec["securityContext"]), fmt.Sprint(container["securityContext"])
		switch name {
		case "agent":
			if !strings.Contains(podSC, "fsGroup:65532") || !strings.Contains(podSC, "runAsNonRoot:true") ||
				!strings.Contains(ctr, "readOnlyRootFilesystem:false") || !strings.Contains(ctr, "add:[NET_BIND_SERVICE NET_RAW]") {
				t.Errorf("%s: securityContext %s, container %s: want the given keys over ours", k, podSC, ctr)
			}
			if !strings.Contains(fmt.Sprint(spec["affinity"]), "key:zone") || fmt.Sprint(objs[k]["spec"].(map[string]any)["updateStrategy"]) != "map[type:OnDelete]" {
				t.Errorf("%s: affinity %v, updateStrategy %v", k, spec["affinity"], objs[k]["spec"].(map[string]any)["updateStrategy"])
			}
		case "writer":
			if !strings.Contains(podSC, "runAsUser:1000") || !strings.Contains(podSC, "seccompProfile") ||
				!strings.Contains(ctr, "drop:[ALL NET_RAW]") || !strings.Contains(ctr, "readOnlyRootFilesystem:true") {
				t.Errorf("%s: securityContext %s, container %s: want the given keys over ours", k, podSC, ctr)
			}
		}
		env := fmt.Sprint(spec["containers"].([]any)[0].(map[string]any)["env"])
		if !strings.Contains(env, "map[name:TZ value:UTC]") {
			t.Errorf("%s: env %s", k, env)
		}
		if name == "writer" && (spec["priorityClassName"] != "high" || spec["topologySpreadConstraints"] == nil ||
			!strings.Contains(fmt.Sprint(spec["affinity"]), "nodeAffinity") || strings.Contains(fmt.Sprint(spec["affinity"]), "podAntiAffinity")) {
			t.Errorf("%s: priority %v, spread %v, affinity %v", k, spec["priorityClassName"], spec["topologySpreadConstraints"], spec["affinity"])
		}
	}
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(helm, "lint", "--strict", "--kube-version", "1.35.0", filepath.Join(repo, "charts", "renumber"), "-f", f).CombinedOutput(); err != nil {
		t.Errorf("helm lint --strict: %v\n%s", err, out)
	}
}

// TestChartRunsAsTheUsersServiceAccounts: with a ServiceAccount named (and
// annotated) for the agent and one the user brings for the writer, the Pods
// run as them, every binding names them, the admission policies match them,
// and the chart creates only the ones it is asked to. (The guards are tried
// with such names on the real API server in TestTheGuardsHoldInAnyNamespace.)
func TestChartRunsAsTheUsersServiceAccounts(t *testing.T) {
	helm, repo := helmBin(t)
	out, err := helmTemplate(t, helm, repo, "agent: {serviceAccount: {name: home-agent, annotations: {team: net}}}\n"+
		"writer: {serviceAccount: {create: false, name: byo-writer}}\nshadow: {enabled: true}\n")
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	if sa := objs["ServiceAccount renumber-system/home-agent"]; sa == nil || fmt.Sprint(sa["metadata"].(map[string]any)["annotations"]) != "map[team:net]" {
		t.Errorf("the agent's ServiceAccount: %v", sa)
	}
	for _, k := range []string{"ServiceAccount renumber-system/byo-writer", "ServiceAccount renumber-system/renumber-writer", "ServiceAccount renumber-system/renumber-agent"} {
		if objs[k] != nil {
			t.Errorf("%s rendered", k)
		}
	}
	if objs["ServiceAccount renumber-system/renumber-shadow"] == nil {
		t.Errorf("the shadow's ServiceAccount is not rendered")
	}
	for k, want := range map[string]string{"DaemonSet renumber-system/renumber-agent": "home-agent",
		"Deployment renumber-system/renumber-writer": "byo-writer", "Deployment renumber-system/renumber-shadow": "renumber-shadow"} {
		if got := podServiceAccount(objs[k]); got != want {
			t.Errorf("%s runs as %q, want %q", k, got, want)
		}
	}
	subjects := 0
	for k, o := range objs {
		list, _ := o["subjects"].([]any)
		for _, s := range list {
			m := s.(map[string]any)
			if m["kind"] == "ServiceAccount" {
				subjects++
				if n := m["name"]; n == "renumber-agent" || n == "renumber-writer" {
					t.Errorf("%s binds %v, not the named ServiceAccount", k, n)
				}
			}
		}
	}
	if subjects == 0 {
		t.Error("no binding names a ServiceAccount: the chart was not read")
	}
	for _, old := range []string{"':renumber-agent'", "':renumber-writer'"} {
		if strings.Contains(string(out), old) {
			t.Errorf("an admission policy still matches %s", old)
		}
	}
	for _, now := range []string{"':home-agent'", "':byo-writer'"} {
		if !strings.Contains(string(out), now) {
			t.Errorf("no admission policy matches %s", now)
		}
	}
}

// TestChartLintsAsADependency: the chart as a dependency of an umbrella chart
// that sets global values and the chart's own under its name passes
// `helm lint --strict`, and renders with those values.
func TestChartLintsAsADependency(t *testing.T) {
	helm, repo := helmBin(t)
	parent := filepath.Join(t.TempDir(), "homelab")
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: homelab\nversion: 1.0.0\ndependencies:\n  - name: renumber\n    version: 0.1.0\n    repository: file://" +
			filepath.Join(repo, "charts", "renumber") + "\n",
		"values.yaml": "global:\n  imageRegistry: registry.example.org\n  storageClass: fast\nrenumber:\n  agent: {interface: enp1s0}\n  commonLabels: {team: net}\n",
	}
	if err := os.MkdirAll(filepath.Join(parent, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(parent, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(helm, "dependency", "build", parent).CombinedOutput(); err != nil {
		t.Fatalf("helm dependency build: %v\n%s", err, out)
	}
	if out, err := exec.Command(helm, "lint", "--strict", "--kube-version", "1.35.0", parent).CombinedOutput(); err != nil {
		t.Fatalf("helm lint --strict of the umbrella chart: %v\n%s", err, out)
	}
	out, err := exec.Command(helm, "template", "homelab", parent, "-n", world.Namespace, "--kube-version", "1.35.0").Output()
	if err != nil {
		t.Fatal(err)
	}
	ds := objects(t, out)["DaemonSet renumber-system/homelab-renumber-agent"]
	if labels := (&unstructured.Unstructured{Object: ds}).GetLabels(); labels["team"] != "net" || labels["app.kubernetes.io/instance"] != "homelab" {
		t.Errorf("the agent DaemonSet's labels %v: want the umbrella's commonLabels and its release", labels)
	}
	if !strings.Contains(fmt.Sprint(ds), "--interface=enp1s0") {
		t.Errorf("the umbrella's value agent.interface not rendered")
	}
}

// TestDisablingThePoliciesMustBeSaid: without the admission policies every
// agent may patch any Node and the writer any Service and pool (RBAC cannot
// name objects), so admissionPolicies.enabled=false alone does not render;
// with acceptUnguardedRBAC it renders without the policies.
func TestDisablingThePoliciesMustBeSaid(t *testing.T) {
	helm, repo := helmBin(t)
	if _, err := helmTemplate(t, helm, repo, "admissionPolicies: {enabled: false}\n"); err == nil || !strings.Contains(err.Error(), "acceptUnguardedRBAC") {
		t.Errorf("policies disabled silently: %v", err)
	}
	out, err := helmTemplate(t, helm, repo, "admissionPolicies: {enabled: false, acceptUnguardedRBAC: true}\n")
	if err != nil {
		t.Fatal(err)
	}
	for k := range objects(t, out) {
		if strings.HasPrefix(k, "ValidatingAdmissionPolicy") {
			t.Errorf("%s rendered with the policies disabled", k)
		}
	}
}

// TestThePoolPoliciesComeWithTheirPools: renumber-writer-siblings takes a
// Calico IPPool as its param, renumber-writer-advertised-services a Cilium
// LB-IPAM pool, and an API server that does not serve a policy's param kind
// logs an error every second for it (measured: "failed to find resource
// referenced by paramKind", once a second): the chart renders each only
// where its kind is served.
func TestThePoolPoliciesComeWithTheirPools(t *testing.T) {
	helm, repo := helmBin(t)
	for policy, kind := range map[string]string{
		"ValidatingAdmissionPolicy /renumber-writer-siblings":            "crd.projectcalico.org/v1/IPPool",
		"ValidatingAdmissionPolicy /renumber-writer-advertised-services": "cilium.io/v2/CiliumLoadBalancerIPPool",
	} {
		for _, served := range []bool{false, true} {
			args := []string{"template", "renumber", filepath.Join(repo, "charts", "renumber"), "-n", world.Namespace, "--kube-version", "1.35.0"}
			if served {
				args = append(args, "--api-versions", kind)
			}
			out, err := exec.Command(helm, args...).Output()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := objects(t, out)[policy]; ok != served {
				t.Errorf("with %s served %v: %s rendered %v", kind, served, policy, ok)
			}
		}
	}
}

// TestTheChartRendersTheWebhookKeys: admissionPolicies.webhookKeys, the
// admin's closed list of the keys their mutating webhook adds, is the first
// variable of each writer policy that holds it - a CEL list of the keys as
// given, [] by default (no key may change) - and in no other policy; a
// key that is no label or annotation key, nor a prefix ending in /, is
// refused by values.schema.json.
func TestTheChartRendersTheWebhookKeys(t *testing.T) {
	helm, repo := helmBin(t)
	for values, want := range map[string]string{
		"":                                     "[]",
		"admissionPolicies: {webhookKeys: []}": "[]",
		`admissionPolicies: {webhookKeys: [policy.example.org/team, "audit.example.org/", team]}`: `["policy.example.org/team","audit.example.org/","team"]`,
	} {
		out, err := helmTemplate(t, helm, repo, values)
		if err != nil {
			t.Fatalf("%q: %v", values, err)
		}
		got := map[string]string{}
		for k, o := range objects(t, out) {
			if !strings.HasPrefix(k, "ValidatingAdmissionPolicy ") {
				continue
			}
			vars, _, _ := unstructured.NestedSlice(o, "spec", "variables")
			for i, v := range vars {
				if v, _ := v.(map[string]any); v["name"] == "webhookKeys" {
					got[fmt.Sprintf("%s, variable %d", strings.TrimPrefix(k, "ValidatingAdmissionPolicy /"), i)] = fmt.Sprint(v["expression"])
				}
			}
		}
		wantAll := map[string]string{}
		for _, p := range webhookPolicies {
			wantAll[p+", variable 0"] = want
		}
		if d := cmp.Diff(wantAll, got); d != "" {
			t.Errorf("values %q: the webhook keys in the policies (-want +got):\n%s", values, d)
		}
	}
	for name, key := range map[string]string{
		"a space":                  `"policy example/team"`,
		"a prefix without a name":  `"/"`,
		"an empty key":             `""`,
		"a prefix of two segments": `"a.example.org/b/"`,
	} {
		if _, err := helmTemplate(t, helm, repo, "admissionPolicies: {webhookKeys: ["+key+"]}\n"); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s (%s): rendered (%v), want refused by values.schema.json", name, key, err)
		}
	}
}

// TestAnUnauthenticatedPortOnTheNodeIsRefused: the agents run with host
// networking, so their metrics port on the node's IP is reachable wherever
// the node is and no NetworkPolicy applies: the chart serves it only behind
// the token guard, and says so when asked for less. By default every process
// serves HTTPS behind the guard and is probed over HTTPS.
func TestAnUnauthenticatedPortOnTheNodeIsRefused(t *testing.T) {
	helm, repo := helmBin(t)
	if _, err := helmTemplate(t, helm, repo, "agent: {metricsAuth: none}\n"); err == nil || !strings.Contains(err.Error(), "unauthenticated port") {
		t.Errorf("an unauthenticated agent port on the node rendered: %v", err)
	}
	if _, err := helmTemplate(t, helm, repo, "agent: {metricsAuth: none, metricsOnNode: false}\n"); err != nil {
		t.Errorf("an unauthenticated agent port on loopback: %v", err)
	}
	out, err := helmTemplate(t, helm, repo, "shadow: {enabled: true}\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"DaemonSet renumber-system/renumber-agent", "Deployment renumber-system/renumber-writer", "Deployment renumber-system/renumber-shadow"} {
		o := objects(t, out)[k]
		if o == nil {
			t.Fatalf("%s not rendered", k)
		}
		c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		if !slices.Contains(c["args"].([]any), any("--metrics-auth=kubernetes")) {
			t.Errorf("%s: args %v, want --metrics-auth=kubernetes", k, c["args"])
		}
		for _, probe := range []string{"readinessProbe", "livenessProbe"} {
			if s := c[probe].(map[string]any)["httpGet"].(map[string]any)["scheme"]; s != "HTTPS" {
				t.Errorf("%s: %s scheme %v, want HTTPS", k, probe, s)
			}
		}
	}
}

// TestTwoReleasesSideBySide: two releases in one namespace (the second
// without the CRD, which the first owns) install into one API server, and no
// selector of one - a workload's, the writer's anti-affinity, the PDB's, the
// NetworkPolicy's, the PodMonitor's - matches the other's Pods.
func TestTwoReleasesSideBySide(t *testing.T) {
	helm, repo := helmBin(t)
	w := bareWorldWith(t, 1)
	if err := w.API.InstallCiliumCRDs(t.Context()); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(repo, "charts", "renumber")
	pods := map[string][]map[string]any{}      // release -> its Pods' labels
	selectors := map[string][]map[string]any{} // release -> its selectors' matchLabels
	for i, release := range []string{"home", "lab"} {
		args := []string{release, chart, "-n", world.Namespace, "--set", "writer.pdb.enabled=true", "--set", "shadow.enabled=true"}
		if i > 0 {
			args = append(args, "--set", "crds.install=false")
		}
		for _, s := range world.LocalImages {
			args = append(args, "--set", s)
		}
		// The PodMonitor's CRD is not in the world: rendered, not installed.
		manifest, err := exec.Command(helm, append(append([]string{"template"}, args...), "--kube-version", "1.35.0",
			"--set", "monitoring.podMonitor.enabled=true")...).Output()
		if err != nil {
			t.Fatalf("helm template %s: %v", release, err)
		}
		for _, o := range objects(t, manifest) {
			if l, ok, _ := unstructured.NestedMap(o, "spec", "template", "metadata", "labels"); ok {
				pods[release] = append(pods[release], l)
			}
			for _, path := range [][]string{{"spec", "selector", "matchLabels"}, {"spec", "podSelector", "matchLabels"}} {
				if m, ok, _ := unstructured.NestedMap(o, path...); ok {
					selectors[release] = append(selectors[release], m)
				}
			}
			terms, _, _ := unstructured.NestedSlice(o, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
			for _, term := range terms {
				if m, ok, _ := unstructured.NestedMap(term.(map[string]any), "podAffinityTerm", "labelSelector", "matchLabels"); ok {
					selectors[release] = append(selectors[release], m)
				}
			}
		}
		if out, err := helmIn(t, w, append([]string{"install", "--create-namespace"}, args...)...); err != nil {
			t.Fatalf("helm install %s: %v\n%s", release, err, out)
		}
	}
	for release, other := range map[string]string{"home": "lab", "lab": "home"} {
		if len(selectors[release]) < 7 || len(pods[other]) < 3 {
			t.Fatalf("%s: %d selectors, %d Pods of %s read", release, len(selectors[release]), len(pods[other]), other)
		}
		for _, sel := range selectors[release] {
			for _, p := range pods[other] {
				matches := true
				for k, v := range sel {
					matches = matches && p[k] == v
				}
				if matches {
					t.Errorf("a selector of %s, %v, matches a Pod of %s: %v", release, sel, other, p)
				}
			}
		}
	}
}

// TestAPodSecurityLevelThatRefusesTheAgentIsSaid: helm install into a
// namespace enforcing baseline fails and says how to fix it (it would
// succeed and leave the agent without Pods); into the namespace
// --create-namespace makes (no level) it installs, and its notes say how to
// set the level.
func TestAPodSecurityLevelThatRefusesTheAgentIsSaid(t *testing.T) {
	_, repo := helmBin(t)
	w := bareWorldWith(t, 1)
	ctx := t.Context()
	if err := w.API.InstallCiliumCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "strict", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}}
	if _, err := w.API.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(repo, "charts", "renumber")
	out, err := helmIn(t, w, "install", "renumber", chart, "-n", "strict")
	if err == nil || !strings.Contains(out, `enforces Pod Security level "baseline"`) || !strings.Contains(out, "kubectl label namespace strict pod-security.kubernetes.io/enforce=privileged") {
		t.Errorf("install into a baseline namespace: %v\n%s", err, out)
	}
	out, err = helmIn(t, w, "install", "renumber", chart, "-n", "fresh", "--create-namespace", "--set", "crds.install=false")
	if err != nil || !strings.Contains(out, "kubectl label namespace fresh pod-security.kubernetes.io/enforce=privileged") {
		t.Errorf("install with --create-namespace: %v\n%s", err, out)
	}
}

// TestNameOverrideNamesEveryObject: nameOverride takes renumber's place in
// every object's name prefix, ServiceAccount references and the policies'
// identities included; the labels keep renumber's names.
func TestNameOverrideNamesEveryObject(t *testing.T) {
	helm, repo := helmBin(t)
	out, err := helmTemplate(t, helm, repo, "nameOverride: dp6\n")
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	ds := objs["DaemonSet renumber-system/renumber-dp6-agent"]
	if ds == nil {
		t.Fatalf("no DaemonSet renumber-dp6-agent in %v", slices.Sorted(maps.Keys(objs)))
	}
	if sa, _, _ := unstructured.NestedString(ds, "spec", "template", "spec", "serviceAccountName"); sa != "renumber-dp6-agent" {
		t.Errorf("the agent runs as %q", sa)
	}
	if !strings.Contains(string(out), "endsWith(':renumber-dp6-agent')") || strings.Contains(string(out), "endsWith(':renumber-agent')") {
		t.Error("the agent's policy does not name its ServiceAccount renumber-dp6-agent")
	}
	for k := range objs {
		if name := k[strings.LastIndex(k, "/")+1:]; strings.HasPrefix(name, "renumber-") && !strings.HasPrefix(name, "renumber-dp6-") {
			t.Errorf("%s keeps the default prefix", k)
		}
	}
}
