package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/tools/world"
)

// TestRT10AKubeVIPPoliciesStayInsideTheirCostAtTheBounds (tenth red
// team, r10a): s30-kubevip bounded kube-vip's ConfigMap (256 entries,
// 16 KiB in the managed key and in its record: renumber-writer-sizes) but
// no test evaluated its two policies at those bounds, as
// TestTheValuePolicyStaysInsideItsCostAtTheBounds does for Services and
// pools. renumber-writer-values fails open: an evaluation pushed past its
// cost admits. With home's history at its bound (16 prefixes), the key at
// 256 ranges of the writer's recorded (the last prefix of the history,
// so that every check walks all 16), the token replaces all 255 with 255
// new ones, recorded, the last outside every prefix: it must be refused.
// The same write all inside is admitted by renumber-writer-kubevip (fails
// closed) and by a copy of renumber-writer-values that fails closed
// (measure): both end true inside their cost.
func TestRT10AKubeVIPPoliciesStayInsideTheirCostAtTheBounds(t *testing.T) {
	s := stealWriterToken(t, nil)
	ctx := t.Context()
	historyAtItsBound(t, s.w)
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.w.API.Apply(ctx, filepath.Join(repo, "manifests", "kube-vip", "rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	const user = "192.0.2.100-192.0.2.110"
	// 255 ranges in 2001:db8:10::/64 (offset: which 255), bad: the last
	// outside.
	ranges := func(offset int, bad bool) []string {
		out := make([]string, 255)
		for i := range out {
			a := fmt.Sprintf("2001:db8:10::ffff:ffff:%x", offset+i)
			if bad && i == len(out)-1 {
				a = fmt.Sprintf("2001:db8:bad::ffff:ffff:%x", offset+i)
			}
			out[i] = a + "-" + a
		}
		return out
	}
	old := ranges(0x1000, false)
	if _, err := s.w.API.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevip", Annotations: map[string]string{"dynamic-prefix.io/name": "home",
			backends.AnnotationKubeVIPKey: "range-global", backends.AnnotationKubeVIPRecord: strings.Join(old, ",")}},
		Data: map[string]string{"range-global": user + "," + strings.Join(old, ",")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id, err := s.w.API.ServiceAccountIn(ctx, world.Namespace, "renumber-writer", "")
	if err != nil {
		t.Fatal(err)
	}
	token := kubernetes.NewForConfigOrDie(id.Config).CoreV1().ConfigMaps("kube-system")
	write := func(entries []string) error {
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"data":{"range-global":%q}}`,
			backends.AnnotationKubeVIPRecord, strings.Join(entries, ","), user+","+strings.Join(entries, ","))
		if n := len(user + "," + strings.Join(entries, ",")); n > 16384 {
			t.Fatalf("the key is %d bytes, past renumber-writer-sizes's bound", n)
		}
		_, err := token.Patch(ctx, "kubevip", types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	if err := write(ranges(0x2000, true)); !denied(err) {
		t.Errorf("kube-vip's key at its bound, every range new and recorded, the last outside home's prefixes: %s, want refused", errString(err))
	}
	measure(t, s.w)
	apply(t, s.w, groupGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup", "metadata": map[string]any{"name": measureProbe}, "spec": map[string]any{"externalCIDRs": []any{}}})
	eventually(t, "the measuring copy refuses its probe", func() (bool, string) {
		err := s.patch(groupGVR, "", measureProbe, `{"spec":{"externalCIDRs":["198.51.100.0/24"]}}`)
		return err != nil && strings.Contains(err.Error(), measureProbe), errString(err)
	})
	if err := write(ranges(0x2000, false)); err != nil {
		t.Errorf("kube-vip's key at its bound, every range new, recorded and inside home's prefixes: refused (a policy did not end true inside its cost): %v", err)
	}
}
