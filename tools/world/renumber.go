package world

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// PoolGVR is the Cilium pool resource the world's CRDs serve.
var PoolGVR = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumloadbalancerippools"}

// StartAgent runs the agent binary at bin in node's namespace with its own
// pod-bound identity, watching eth0. Its log is <world>/agent-<node>.log.
func (w *World) StartAgent(ctx context.Context, bin, node string, extra ...string) (*exec.Cmd, error) {
	return w.StartAgentAs(ctx, "renumber-agent", bin, node, extra...)
}

// StartAgentAs starts an agent on node with the token of the ServiceAccount
// sa (a chart release's, <release>-renumber-agent).
func (w *World) StartAgentAs(ctx context.Context, sa, bin, node string, extra ...string) (*exec.Cmd, error) {
	id, err := w.API.ServiceAccount(ctx, sa, node)
	if err != nil {
		return nil, err
	}
	// Each node's agent keeps its memory of the routers in its own
	// directory, which outlives the agent as a hostPath does.
	state := filepath.Join(w.Dir, "state-"+node)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, err
	}
	argv := append([]string{bin, "--node-name", node, "--interface", "eth0", "--kubeconfig", id.Kubeconfig,
		"--metrics-addr", "[::1]:9470", "--state-dir", state}, append(append([]string(nil), w.AgentArgs...), extra...)...)
	return w.Spawn(node, "agent-"+node+".log", argv...)
}

// StartWriter runs the writer binary at bin in the root namespace as name, with
// the writer's identity. Its log is <world>/<name>.log.
func (w *World) StartWriter(ctx context.Context, bin, name string, extra ...string) (*exec.Cmd, error) {
	return w.StartWriterAs(ctx, "renumber-writer", bin, name, extra...)
}

// StartWriterAs starts a writer named name with the token of the
// ServiceAccount sa (renumber-shadow for a shadow writer).
func (w *World) StartWriterAs(ctx context.Context, sa, bin, name string, extra ...string) (*exec.Cmd, error) {
	id, err := w.API.ServiceAccount(ctx, sa, "")
	if err != nil {
		return nil, err
	}
	argv := append([]string{bin, "--kubeconfig", id.Kubeconfig, "--identity", name, "--metrics-addr", "127.0.0.1:0"}, extra...)
	return w.spawnEnv("", name+".log", w.WriterEnv, argv...)
}

// ShippedWriterEnv is the literal environment (GOMEMLIMIT, GOGC) of the writer
// container in manifests/writer/deployment.yaml: what the writer ships with.
func ShippedWriterEnv() ([]string, error) {
	repo, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(repo, "manifests", "writer", "deployment.yaml"))
	if err != nil {
		return nil, err
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	var env []string
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if c.Name == "writer" && e.ValueFrom == nil {
				env = append(env, e.Name+"="+e.Value)
			}
		}
	}
	if len(env) == 0 {
		return nil, errors.New("world: no literal env in the writer Deployment")
	}
	return env, nil
}

// StartAll starts an agent on every node and the named writers, each writer
// with writerArgs.
func (w *World) StartAll(ctx context.Context, agentBin, writerBin string, writerArgs []string, writers ...string) (map[string]*exec.Cmd, error) {
	procs := map[string]*exec.Cmd{}
	for _, n := range w.Net.Nodes {
		c, err := w.StartAgent(ctx, agentBin, n.Name)
		if err != nil {
			return nil, err
		}
		procs["agent-"+n.Name] = c
	}
	for _, name := range writers {
		c, err := w.StartWriter(ctx, writerBin, name, writerArgs...)
		if err != nil {
			return nil, err
		}
		procs[name] = c
	}
	return procs, nil
}

// Blocks returns a CiliumLoadBalancerIPPool's blocks as "cidr" or "start-stop".
func Blocks(u *unstructured.Unstructured) []string {
	bs, _, _ := unstructured.NestedSlice(u.Object, "spec", "blocks")
	var out []string
	for _, b := range bs {
		m, _ := b.(map[string]any)
		if c, ok := m["cidr"].(string); ok {
			out = append(out, c)
		} else {
			out = append(out, fmt.Sprint(m["start"], "-", m["stop"]))
		}
	}
	return out
}

// PoolBlocks reads a pool's blocks.
func (cp *ControlPlane) PoolBlocks(ctx context.Context, name string) ([]string, error) {
	u, err := cp.Dynamic.Resource(PoolGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return Blocks(u), nil
}

// RangeOf is the block the example address range "::f000:0:0:0" to
// "::ffff:ffff:ffff:ffff" gives on a /64 whose last two groups are zero.
func RangeOf(p64 string) string {
	base := strings.TrimSuffix(p64, "::/64")
	return base + ":f000::-" + base + ":ffff:ffff:ffff:ffff"
}

// StartLBIPAM runs Cilium's own LB-IPAM (tools/lbipam, which `make tools`
// builds into _out/bin) against the world's API server with the admin's
// identity, as cilium-operator would: it allocates Service addresses from the
// CiliumLoadBalancerIPPools and writes status.loadBalancer.ingress. Its log is
// <world>/lbipam.log.
func (w *World) StartLBIPAM() (*exec.Cmd, error) {
	bin := filepath.Join(w.repo, "_out", "bin", "lbipam")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the LB-IPAM harness is not built (make tools): %w", err)
	}
	return w.Spawn("", "lbipam.log", bin, "--k8s-kubeconfig-path", w.API.AdminFile)
}

// StartCiliumGateway installs the CRDs Cilium's Gateway API controller
// writes and reads besides the Gateway API's (CiliumEnvoyConfig,
// CiliumGatewayClassConfig) and starts that controller (make ciliumgw).
func (w *World) StartCiliumGateway(ctx context.Context) (*exec.Cmd, error) {
	bin := filepath.Join(w.repo, "_out", "bin", "ciliumgw")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("cilium's Gateway API controller is not built (make ciliumgw): %w", err)
	}
	dir, err := CiliumCRDDir()
	if err != nil {
		return nil, err
	}
	if err := w.API.Apply(ctx, filepath.Join(dir, "ciliumenvoyconfigs.yaml"),
		filepath.Join(filepath.Dir(dir), "v2alpha1", "ciliumgatewayclassconfigs.yaml")); err != nil {
		return nil, err
	}
	return w.Spawn("", "ciliumgw.log", bin, "--k8s-kubeconfig-path", w.API.AdminFile)
}
