package e2e

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/renumber/renumber/internal/digest"
)

// TestAgentCanTouchOnlyItsOwnDigest checks manifests/agent/policy.yaml against the
// real API server with a real pod-bound agent token.
func TestAgentCanTouchOnlyItsOwnDigest(t *testing.T) {
	w := newWorld(t, 2)
	ctx := t.Context()
	id, err := w.API.ServiceAccount(ctx, "renumber-agent", "node1")
	if err != nil {
		t.Fatal(err)
	}
	agent := kubernetes.NewForConfigOrDie(id.Config)
	patch := func(node, body string) error {
		_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	own := `{"metadata":{"annotations":{"` + digest.Annotation + `":"v1;eth0="}}}`
	// The policy takes a moment to be loaded by the API server after creation.
	eventually(t, "policy enforced", func() (bool, string) {
		err := patch("node2", own)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), errString(err)
	})
	if err := patch("node1", own); err != nil {
		t.Errorf("agent bound to node1 cannot write node1's digest: %v", err)
	}
	denied := map[string]struct{ node, body string }{
		"another node's digest": {"node2", own},
		"a label":               {"node1", `{"metadata":{"labels":{"evil":"true"}}}`},
		"another annotation":    {"node1", `{"metadata":{"annotations":{"other":"x"}}}`},
		"a taint":               {"node1", `{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`},
		"unschedulable":         {"node1", `{"spec":{"unschedulable":true}}`},
	}
	for name, d := range denied {
		if err := patch(d.node, d.body); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want denied", name, err)
		}
	}
	if err := agent.CoreV1().Nodes().Delete(ctx, "node1", metav1.DeleteOptions{}); err == nil {
		t.Error("agent deleted its node")
	}
}

func errString(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}
