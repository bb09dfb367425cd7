package world

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The shipped install's workloads.
const (
	AgentDaemonSet   = "renumber-agent"
	WriterDeployment = "renumber-writer"
)

// Install installs Cilium's CRDs (what a cluster renumber serves has), then
// renumber the way how names: "kustomize" (InstallKustomize) or "helm"
// (InstallHelm, the chart's defaults). Either brings the DynamicPrefix CRD.
// sets are chart values ("key=value") for "helm".
func (w *World) Install(ctx context.Context, how string, sets ...string) error {
	if err := w.API.InstallCiliumCRDs(ctx); err != nil {
		return err
	}
	switch how {
	case "kustomize":
		return w.InstallKustomize(ctx)
	case "helm":
		return w.InstallHelm(ctx, sets...)
	}
	return fmt.Errorf("world: install %q: want kustomize or helm", how)
}

// WaitInstalled waits until the agent DaemonSet and the writer Deployment have
// rolled out, every Pod Ready.
func (w *World) WaitInstalled(ctx context.Context, limit time.Duration) error {
	if err := w.WaitRollout(ctx, "DaemonSet", AgentDaemonSet, limit); err != nil {
		return err
	}
	return w.WaitRollout(ctx, "Deployment", WriterDeployment, limit)
}

// InstallKustomize applies the shipped install, `kubectl kustomize manifests/`,
// unchanged, as `kubectl apply -k manifests/` would (server-side, as the admin).
// Real nodes then run it as Pods.
func (w *World) InstallKustomize(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "kubectl", "kustomize", filepath.Join(w.repo, "manifests")).Output()
	if err != nil {
		return fmt.Errorf("kubectl kustomize manifests: %w", err)
	}
	return w.API.ApplyYAML(ctx, out)
}

// LocalImages are the chart values that name the images built here (what
// manifests/ names), instead of the release's.
var LocalImages = []string{"agent.image.repository=renumber/agent", "agent.image.tag=dev",
	"writer.image.repository=renumber/writer", "writer.image.tag=dev"}

// InstallHelm installs charts/renumber with `helm install` (the pinned Helm,
// make helm) into renumber-system, created first as the README says, with the
// chart's values set by sets ("key=value").
func (w *World) InstallHelm(ctx context.Context, sets ...string) error {
	helm, err := Bin("helm")
	if err != nil {
		return err
	}
	for _, argv := range [][]string{
		{"kubectl", "--kubeconfig", w.API.AdminFile, "create", "namespace", Namespace},
		{"kubectl", "--kubeconfig", w.API.AdminFile, "label", "namespace", Namespace, "pod-security.kubernetes.io/enforce=privileged"},
	} {
		if err := run(ctx, argv...); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
			return err
		}
	}
	argv := []string{helm, "install", "renumber", filepath.Join(w.repo, "charts", "renumber"), "--namespace", Namespace,
		"--kubeconfig", w.API.AdminFile}
	// The images the nodes hold (built offline, make node-images), not the
	// release's on ghcr.io: the same names the manifests use.
	for _, s := range append(LocalImages, sets...) {
		argv = append(argv, "--set", s)
	}
	if err := run(ctx, argv...); err != nil {
		return err
	}
	// The chart's CRD, created with the rest: served before the install is
	// called done (a DynamicPrefix may be created next).
	return w.API.waitEstablished(ctx, "dynamicprefixes.dynamic-prefix.io")
}

// WaitRollout waits until the DaemonSet or Deployment namespace/name has
// rolled out: every replica updated, available and ready, and none old left.
func (w *World) WaitRollout(ctx context.Context, kind, name string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	apps := w.API.Client.AppsV1()
	var last string
	for {
		var done bool
		switch kind {
		case "DaemonSet":
			if ds, err := apps.DaemonSets(Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
				done, last = daemonSetDone(ds)
			}
		case "Deployment":
			if d, err := apps.Deployments(Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
				done, last = deploymentDone(d)
			}
		default:
			return fmt.Errorf("world: cannot wait for a %s", kind)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("world: %s %s not rolled out (%s): %w", kind, name, last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func daemonSetDone(ds *appsv1.DaemonSet) (bool, string) {
	s := ds.Status
	state := fmt.Sprintf("desired %d updated %d ready %d available %d", s.DesiredNumberScheduled, s.UpdatedNumberScheduled, s.NumberReady, s.NumberAvailable)
	return s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled > 0 &&
		s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled &&
		s.NumberAvailable == s.DesiredNumberScheduled && s.CurrentNumberScheduled == s.DesiredNumberScheduled, state
}

func deploymentDone(d *appsv1.Deployment) (bool, string) {
	s := d.Status
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	state := fmt.Sprintf("want %d replicas %d updated %d ready %d available %d", want, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas)
	return s.ObservedGeneration >= d.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want, state
}

// Drain does what `kubectl drain --ignore-daemonsets` does: cordons node and
// evicts every Pod on it that no DaemonSet owns, through the Eviction API (so
// PodDisruptionBudgets hold), retrying an eviction a budget refuses.
func (w *World) Drain(ctx context.Context, node string) error {
	core := w.API.Client.CoreV1()
	if _, err := core.Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordon %s: %w", node, err)
	}
	pods, err := core.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if owner := metav1.GetControllerOf(&p); owner != nil && owner.Kind == "DaemonSet" {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		for {
			err := core.Pods(p.Namespace).EvictV1(ctx, ev)
			if err == nil || apierrors.IsNotFound(err) {
				break
			}
			if !apierrors.IsTooManyRequests(err) {
				return fmt.Errorf("evicting %s: %w", p.Name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("evicting %s: %w", p.Name, err)
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}
