package world

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// Namespace is where the project's ServiceAccounts live (manifests/base).
const Namespace = "renumber-system"

// Apply server-side-applies every object in the YAML files (as the world admin)
// and waits for CRDs among them to be established.
func (cp *ControlPlane) Apply(ctx context.Context, files ...string) error {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := cp.ApplyYAML(ctx, b); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// ApplyYAML server-side-applies every object in a multi-document YAML stream.
func (cp *ControlPlane) ApplyYAML(ctx context.Context, data []byte) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cp.Client.Discovery()))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := cp.applyOne(ctx, mapper, &obj); err != nil {
			return err
		}
	}
}

func (cp *ControlPlane) applyOne(ctx context.Context, mapper *restmapper.DeferredDiscoveryRESTMapper, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	var mapping *meta.RESTMapping
	var err error
	for range 50 { // a CRD applied just before may take a moment to be served
		if mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			break
		}
		mapper.Reset()
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("mapping %s: %w", gvk, err)
	}
	res := cp.Dynamic.Resource(mapping.Resource)
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	var ri interface {
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
	} = res
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		ri = res.Namespace(ns)
	}
	if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "world", Force: ptr.To(true)}); err != nil {
		return fmt.Errorf("applying %s %q: %w", gvk.Kind, obj.GetName(), err)
	}
	if gvk.Kind == "CustomResourceDefinition" {
		return cp.waitEstablished(ctx, obj.GetName())
	}
	return nil
}

func (cp *ControlPlane) waitEstablished(ctx context.Context, name string) error {
	crds := cp.Dynamic.Resource(crdGVR)
	for range 100 {
		u, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("CRD %s not established", name)
}

// InstallCRDs installs Cilium's real CRD schemas (InstallCiliumCRDs) and this
// project's own CRDs from manifests/crds.
func (cp *ControlPlane) InstallCRDs(ctx context.Context) error {
	if err := cp.InstallCiliumCRDs(ctx); err != nil {
		return err
	}
	own, err := filepath.Glob(filepath.Join(cp.w.repo, "manifests", "crds", "*.yaml"))
	if err != nil {
		return err
	}
	return cp.Apply(ctx, own...)
}

// InstallCiliumCRDs installs Cilium's real CRD schemas (from the cilium module
// the writer imports): before `helm install`, which brings the project's own.
func (cp *ControlPlane) InstallCiliumCRDs(ctx context.Context) error {
	dir, err := CiliumCRDDir()
	if err != nil {
		return err
	}
	return cp.Apply(ctx,
		filepath.Join(dir, "ciliumloadbalancerippools.yaml"),
		filepath.Join(dir, "ciliumcidrgroups.yaml"),
		filepath.Join(dir, "ciliumbgpadvertisements.yaml"),
	)
}

// MetalLBVersion is the MetalLB release whose CRD schemas the world installs. It
// is downloaded from the Go module proxy, not added to go.mod: nothing imports it.
const MetalLBVersion = "v0.16.2"

// InstallMetalLB installs MetalLB's real IPAddressPool CRD.
func (cp *ControlPlane) InstallMetalLB(ctx context.Context) error {
	dir, err := moduleDir("go.universe.tf/metallb@" + MetalLBVersion)
	if err != nil {
		return err
	}
	return cp.Apply(ctx, filepath.Join(dir, "config", "crd", "bases", "metallb.io_ipaddresspools.yaml"))
}

// PrometheusOperatorVersion is the prometheus-operator release whose
// PodMonitor and PrometheusRule CRDs the world installs (the chart's
// monitoring objects), from the Go module proxy; not added to go.mod.
const PrometheusOperatorVersion = "v0.85.0"

// InstallPrometheusOperator installs the real PodMonitor and PrometheusRule CRDs.
func (cp *ControlPlane) InstallPrometheusOperator(ctx context.Context) error {
	dir, err := moduleDir("github.com/prometheus-operator/prometheus-operator@" + PrometheusOperatorVersion)
	if err != nil {
		return err
	}
	crds := filepath.Join(dir, "example", "prometheus-operator-crd")
	return cp.Apply(ctx, filepath.Join(crds, "monitoring.coreos.com_podmonitors.yaml"),
		filepath.Join(crds, "monitoring.coreos.com_prometheusrules.yaml"))
}

// InstallPrometheusCRD installs the real Prometheus CRD of the same release:
// the scrape class a PodMonitor may name lives in it.
func (cp *ControlPlane) InstallPrometheusCRD(ctx context.Context) error {
	dir, err := moduleDir("github.com/prometheus-operator/prometheus-operator@" + PrometheusOperatorVersion)
	if err != nil {
		return err
	}
	return cp.Apply(ctx, filepath.Join(dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_prometheuses.yaml"))
}

// CalicoVersion is the Calico monorepo version whose IPPool CRD schema the world
// installs: the only version of github.com/projectcalico/calico the Go module
// proxy serves here (its tags are not module versions; this pseudo-version is
// the master branch of 2025-08-13, between Calico v3.30 and v3.31). Not added
// to go.mod: nothing imports it.
const CalicoVersion = "v1.11.0-cni-plugin.0.20250813170300-a0db560f0520"

// InstallCalico installs Calico's real crd.projectcalico.org/v1 CRDs of the
// kinds renumber follows: IPPool, NetworkSet and GlobalNetworkSet - and the
// writer's admission policy whose param is an IPPool (as the chart does where
// Calico is installed), once the API server resolves that param kind.
func (cp *ControlPlane) InstallCalico(ctx context.Context) error {
	dir, err := moduleDir("github.com/projectcalico/calico@" + CalicoVersion)
	if err != nil {
		return err
	}
	crds := filepath.Join(dir, "libcalico-go", "config", "crd")
	if err := cp.Apply(ctx, filepath.Join(crds, "crd.projectcalico.org_ippools.yaml"),
		filepath.Join(crds, "crd.projectcalico.org_networksets.yaml"),
		filepath.Join(crds, "crd.projectcalico.org_globalnetworksets.yaml")); err != nil {
		return err
	}
	return cp.applyParamPolicy(ctx, "policy-calico.yaml",
		schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ippools"},
		map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": "world-probe"}, "spec": map[string]any{"cidr": "fd00:ffff::/64"}})
}

// applyParamPolicy applies manifests/writer/<file>, a policy whose param is
// a kind of another project's, and returns once the API server resolved that
// kind: until then the policy fails every request it matches, the admin's
// too, which a dry-run create of probe, of a kind it matches, shows.
func (cp *ControlPlane) applyParamPolicy(ctx context.Context, file string, gvr schema.GroupVersionResource, probe map[string]any) error {
	if err := cp.Apply(ctx, filepath.Join(cp.w.repo, "manifests", "writer", file)); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: probe}
	for {
		_, err := cp.Dynamic.Resource(gvr).Create(ctx, u.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "failed to configure policy") {
			return fmt.Errorf("probing %s after %s: %w", gvr.Resource, file, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never resolved its param kind: %w", file, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// GatewayAPIVersion is the Gateway API release whose standard-channel CRDs
// the world installs (the release Cilium v1.20.1 builds against), from the Go
// module proxy; the root go.mod has it only as Cilium's dependency.
const GatewayAPIVersion = "v1.6.1"

// GatewayAPIOldest is the oldest Gateway API release the docs claim (v1.2:
// the first with spec.infrastructure in the standard channel). The world
// installs it where the API server is older than 1.31: GatewayAPIVersion's
// CRDs call CEL's isIP, which 1.30 does not know (TestTheOldestKubernetes...).
const GatewayAPIOldest = "v1.2.1"

// InstallGatewayAPI installs every CRD of the Gateway API's standard channel
// (not the ValidatingAdmissionPolicy the channel ships beside them):
// GatewayAPIVersion's, or GatewayAPIOldest's on an API server before 1.31.
func (cp *ControlPlane) InstallGatewayAPI(ctx context.Context) error {
	version := GatewayAPIVersion
	v, err := cp.Client.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	if minor, err := strconv.Atoi(strings.TrimSuffix(v.Minor, "+")); err == nil && v.Major == "1" && minor < 31 {
		version = GatewayAPIOldest
	}
	dir, err := moduleDir("sigs.k8s.io/gateway-api@" + version)
	if err != nil {
		return err
	}
	crds, err := filepath.Glob(filepath.Join(dir, "config", "crd", "standard", "gateway.networking.k8s.io_*.yaml"))
	if err != nil {
		return err
	}
	crds = slices.DeleteFunc(crds, func(f string) bool { return strings.Contains(filepath.Base(f), "_vap_") })
	if len(crds) == 0 {
		return fmt.Errorf("no CRDs in %s", dir)
	}
	return cp.Apply(ctx, crds...)
}

// moduleDir downloads a module (module cache, then the proxy) and returns its directory.
func moduleDir(query string) (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", query).Output()
	if err != nil {
		return "", fmt.Errorf("downloading %s: %w", query, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("downloading %s: %s", query, m.Error)
	}
	return m.Dir, nil
}

// CiliumCRDDir is the v2 CRD directory of the cilium module this repository pins.
func CiliumCRDDir() (string, error) {
	repo, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cilium/cilium")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating the cilium module: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "pkg", "k8s", "apis", "cilium.io", "client", "crds", "v2"), nil
}

// InstallRBAC applies the namespace, the shipped RBAC for agent, writer, reader
// and shadow writer, and the admission policies that keep the agent to its
// own Node and the writer to its own fields - and, on Kubernetes 1.31 or
// later, to values inside the prefixes its DynamicPrefixes name.
func (cp *ControlPlane) InstallRBAC(ctx context.Context) error {
	v, err := cp.Client.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	minor, _ := strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
	var files []string
	for _, f := range rbacFiles(minor) {
		files = append(files, filepath.Join(cp.w.repo, "manifests", f))
	}
	if err := cp.Apply(ctx, files...); err != nil {
		return err
	}
	// Where Cilium's pools are served (InstallCRDs), the policy whose param
	// is one, as the chart installs it there.
	pools := schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumloadbalancerippools"}
	if _, err := cp.Dynamic.Resource(pools).List(ctx, metav1.ListOptions{Limit: 1}); apierrors.IsNotFound(err) {
		return nil // not served: nothing to install
	} else if err != nil {
		return err
	}
	return cp.applyParamPolicy(ctx, "policy-cilium.yaml",
		schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumbgpadvertisements"},
		map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
			"metadata": map[string]any{"name": "world-probe"}, "spec": map[string]any{"advertisements": []any{}}})
}

// rbacFiles are the files of manifests/ InstallRBAC applies to an API server
// of minor version minor: the world's identities are the shipped ones, which
// the writer's backends test holds to what each pool kind declares
// (internal/writer/backends/declare_test.go).
func rbacFiles(minor int) []string {
	files := []string{
		"base/namespace.yaml", "base/metrics.yaml",
		"agent/rbac.yaml", "agent/policy.yaml",
		"writer/rbac.yaml", "writer/policy.yaml",
		"reader/rbac.yaml", "shadow/rbac.yaml",
	}
	if minor >= 31 {
		files = append(files, "writer/policy-values.yaml")
	}
	return files
}

// Identity is a ServiceAccount token with a kubeconfig file and a rest.Config.
type Identity struct {
	User       string // as the audit log names it
	Kubeconfig string
	Config     *rest.Config
}

// ServiceAccount mints a token for namespace/sa through the TokenRequest API. With
// node set, the token is bound to a Pod object placed on that node, so it carries
// the node's name the way a DaemonSet pod's token does.
func (cp *ControlPlane) ServiceAccount(ctx context.Context, sa, node string) (*Identity, error) {
	return cp.ServiceAccountIn(ctx, Namespace, sa, node)
}

// ServiceAccountIn is ServiceAccount for namespace ns/sa (an install in
// another namespace than the world's).
func (cp *ControlPlane) ServiceAccountIn(ctx context.Context, ns, sa, node string) (*Identity, error) {
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * 3600))}}
	podName := sa
	if ns != Namespace {
		podName = ns + "-" + sa
	}
	if node != "" {
		podName += "-" + node
		pod, err := cp.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName},
			Spec: corev1.PodSpec{
				NodeName: node, ServiceAccountName: sa,
				AutomountServiceAccountToken: ptr.To(false),
				Containers:                   []corev1.Container{{Name: "c", Image: "none"}},
			},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			pod, err = cp.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("creating pod for %s on %s: %w", sa, node, err)
		}
		req.Spec.BoundObjectRef = &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := cp.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for %s: %w", sa, err)
	}
	id := &Identity{
		User:       "system:serviceaccount:" + ns + ":" + sa,
		Kubeconfig: filepath.Join(cp.w.Dir, podName+".kubeconfig"),
		Config: &rest.Config{
			Host:            cp.URL,
			BearerToken:     tr.Status.Token,
			TLSClientConfig: rest.TLSClientConfig{CAFile: cp.pki.CAFile},
		},
	}
	return id, cp.writeKubeconfig(id.Kubeconfig, podName, map[string]string{"token": tr.Status.Token})
}

func (cp *ControlPlane) writeKubeconfig(path, user string, creds map[string]string) error {
	return cp.writeKubeconfigTo(path, cp.URL, user, creds)
}

func (cp *ControlPlane) writeKubeconfigTo(path, server, user string, creds map[string]string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Config\nclusters:\n- name: world\n  cluster:\n    server: %s\n    certificate-authority: %s\n", server, cp.pki.CAFile)
	fmt.Fprintf(&b, "users:\n- name: %s\n  user:\n", user)
	for _, k := range []string{"client-certificate", "client-key", "token"} {
		if v, ok := creds[k]; ok {
			fmt.Fprintf(&b, "    %s: %q\n", k, v)
		}
	}
	fmt.Fprintf(&b, "contexts:\n- name: world\n  context:\n    cluster: world\n    user: %s\ncurrent-context: world\n", user)
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
