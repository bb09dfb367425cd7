package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// TestKindConfig decodes e2e/kind/kind-config.yaml strictly into kind's own
// v1alpha4 types (unknown or mistyped fields fail, as kind's loader fails), and
// checks what the scenarios rely on: 1 control plane + 2 workers, a dual-stack
// network, and an audit log whose policy file exists and is mounted where the
// API server reads it.
func TestKindConfig(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(repo, "e2e", "kind", "kind-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c v1alpha4.Cluster
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("kind would refuse the config: %v", err)
	}
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		t.Errorf("kind/apiVersion = %s/%s", c.Kind, c.APIVersion)
	}
	if c.Networking.IPFamily != v1alpha4.DualStackFamily {
		t.Errorf("ipFamily = %q, want dual (the nodes need IPv6 on the kind network)", c.Networking.IPFamily)
	}
	roles := map[v1alpha4.NodeRole]int{}
	for _, n := range c.Nodes {
		roles[n.Role]++
	}
	if roles[v1alpha4.ControlPlaneRole] != 1 || roles[v1alpha4.WorkerRole] != 2 {
		t.Errorf("nodes = %v, want 1 control plane and 2 workers", roles)
	}
	cp := c.Nodes[0]
	if len(cp.ExtraMounts) != 1 || len(cp.KubeadmConfigPatches) != 1 {
		t.Fatalf("control plane: %d mounts, %d kubeadm patches", len(cp.ExtraMounts), len(cp.KubeadmConfigPatches))
	}
	if _, err := os.Stat(filepath.Join(repo, cp.ExtraMounts[0].HostPath)); err != nil {
		t.Errorf("audit policy mount: %v (kind resolves hostPath from the repository root)", err)
	}
	var patch struct {
		Kind      string `yaml:"kind"`
		APIServer struct {
			ExtraArgs    map[string]string `yaml:"extraArgs"`
			ExtraVolumes []struct {
				Name, HostPath, MountPath, PathType string
				ReadOnly                            bool
			} `yaml:"extraVolumes"`
		} `yaml:"apiServer"`
	}
	if err := yaml.Unmarshal([]byte(cp.KubeadmConfigPatches[0]), &patch); err != nil {
		t.Fatalf("kubeadm patch: %v", err)
	}
	policy := patch.APIServer.ExtraArgs["audit-policy-file"]
	logPath := patch.APIServer.ExtraArgs["audit-log-path"]
	if patch.Kind != "ClusterConfiguration" || policy != cp.ExtraMounts[0].ContainerPath || logPath == "" {
		t.Errorf("kubeadm patch: kind %q, policy %q (mounted at %q), log %q", patch.Kind, policy, cp.ExtraMounts[0].ContainerPath, logPath)
	}
	mounted := func(path string) bool {
		for _, v := range patch.APIServer.ExtraVolumes {
			if strings.HasPrefix(path, v.MountPath) {
				return true
			}
		}
		return false
	}
	if !mounted(policy) || !mounted(logPath) {
		t.Errorf("the API server pod does not mount the policy (%v) or the log directory (%v)", mounted(policy), mounted(logPath))
	}
}
