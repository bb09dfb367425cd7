package e2e

// r9a: kube-vip's pool ConfigMap under the stolen writer token. When the
// red team wrote these, no admission policy matched it - nor the record and
// follow annotations the writer reads there, which renumber-writer-pools
// holds on every other pool kind; renumber-writer-kubevip holds it now.

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/tools/world"
)

// kubeVIPUnderAStolenToken is TestKubeVIP's world (kubeVIPWorld) cut to
// one ConfigMap: kube-system/kubevip's range-global holding the
// user's IPv4 range beside the writer's entry for lb. It returns the
// stolen writer token (a typed client: the ConfigMap is a core kind) once
// the writer has put its entry in.
func kubeVIPUnderAStolenToken(t *testing.T, user string) (*world.World, kubernetes.Interface) {
	t.Helper()
	w := kubeVIPWorld(t)
	ctx := t.Context()
	if _, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevip", Annotations: map[string]string{"dynamic-prefix.io/name": "home",
			"dynamic-prefix.io/address-range": "lb", backends.AnnotationKubeVIPKey: "range-global"}},
		Data: map[string]string{"range-global": user, "cidr-default": "198.51.100.0/28"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a", "--kube-vip-configmap", backends.DefaultKubeVIPConfigMap)
	kubeVIPDataIs(t, w, map[string]string{"cidr-default": "198.51.100.0/28", "range-global": user + "," + rangeOf(prefixA.String())})
	id, err := w.API.ServiceAccountIn(ctx, world.Namespace, "renumber-writer", "")
	if err != nil {
		t.Fatal(err)
	}
	return w, kubernetes.NewForConfigOrDie(id.Config)
}

func kubeVIPDataIs(t *testing.T, w *world.World, want map[string]string) {
	t.Helper()
	eventually(t, fmt.Sprintf("kubevip data %v", want), func() (bool, string) {
		cm, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Get(t.Context(), "kubevip", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return fmt.Sprint(cm.Data) == fmt.Sprint(want), fmt.Sprint(cm.Data)
	})
}

// TestRT9ATokenRecordsNoUsersRangeInKubeVIPsPool: the records rules
// (renumber-writer-pools: a record grows only by an entry the same write
// adds) hold every pool kind but kube-vip's ConfigMap, which no policy
// matches. The stolen token adds the user's 192.0.2.100-192.0.2.110 to
// dynamic-prefix.io/managed-kubevip-entries, one patch. The honest writer
// then owns it (holdings.Held.Claim: what the record names and the prefix
// does not ask for goes) and takes it out of range-global: the kube-vip
// cloud provider has no IPv4 range left for LoadBalancer Services in any
// namespace, and the writer never puts it back (it is no longer the
// user's by any record). The same forgery on a CiliumLoadBalancerIPPool
// is refused (TestAStolenWriterTokenTakesNoUsersEntryOffAFollowingObject).
func TestRT9ATokenRecordsNoUsersRangeInKubeVIPsPool(t *testing.T) {
	const user = "192.0.2.100-192.0.2.110"
	w, token := kubeVIPUnderAStolenToken(t, user)
	ctx := t.Context()
	cm, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubevip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours := cm.Annotations[backends.AnnotationKubeVIPRecord]
	forged := user + "," + ours
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, backends.AnnotationKubeVIPRecord, forged)
	if _, err := token.CoreV1().ConfigMaps("kube-system").Patch(ctx, "kubevip", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Logf("the token's record naming the user's range refused (held): %v", err)
	} else {
		t.Logf("the token's record %q admitted", forged)
	}
	// The honest writer's pass on what the token left: it rewrites the
	// record (whatever it makes of it) once it read the token's.
	eventually(t, "the writer's pass after the token's write", func() (bool, string) {
		cm, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubevip", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return cm.Annotations[backends.AnnotationKubeVIPRecord] != forged, cm.Annotations[backends.AnnotationKubeVIPRecord]
	})
	cm, err = w.API.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubevip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(cm.Data["range-global"], ","), user) {
		t.Errorf("the user's %s taken out of kube-vip's range-global by the honest writer, after the stolen token named it in %s: %v",
			user, backends.AnnotationKubeVIPRecord, cm.Data)
	}
}

// TestRT9ATokenMovesNoKubeVIPKeyFromUnderTheWriter: renumber-writer-pools
// freezes a pool's dynamic-prefix.io/ annotations (they say what the pool
// follows), but no policy matches kube-vip's ConfigMap, and its
// dynamic-prefix.io/kubevip-key says which key the writer manages. The
// stolen token points it at range-kube-system, one patch. The honest
// writer follows the key it now names and never reads range-global again
// ("no other key is read or written"), so its entry for prefixA stays
// there recorded by nothing: the user's, for good. When home is deleted
// the writer releases what its record names - under range-kube-system -
// and kube-vip keeps handing out prefixA's addresses from range-global to
// LoadBalancer Services in every namespace, after the prefix is gone.
func TestRT9ATokenMovesNoKubeVIPKeyFromUnderTheWriter(t *testing.T) {
	const user = "192.0.2.100-192.0.2.110"
	w, token := kubeVIPUnderAStolenToken(t, user)
	ctx := t.Context()
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:"range-kube-system"}}}`, backends.AnnotationKubeVIPKey)
	if _, err := token.CoreV1().ConfigMaps("kube-system").Patch(ctx, "kubevip", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Logf("the token's %s moved to range-kube-system refused (held): %v", backends.AnnotationKubeVIPKey, err)
	} else {
		t.Logf("the token's %s moved to range-kube-system admitted", backends.AnnotationKubeVIPKey)
		eventually(t, "the writer's pass after the token's write", func() (bool, string) {
			cm, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubevip", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return cm.Data["range-kube-system"] != "", fmt.Sprint(cm.Data)
		})
	}
	// The user deletes home: the writer releases everything it wrote.
	if err := w.API.Dynamic.Resource(api.GVR).Delete(ctx, "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "home released from kubevip", func() (bool, string) {
		cm, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubevip", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, recorded := cm.Annotations[backends.AnnotationKubeVIPRecord]
		return !recorded, fmt.Sprint(cm.Annotations)
	})
	cm, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubevip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["range-global"]; got != user {
		t.Errorf("home deleted and released, kube-vip's range-global still hands out %q (want the user's %q alone): "+
			"the writer's entry for %v, orphaned when the stolen token moved %s", got, user, prefixA, backends.AnnotationKubeVIPKey)
	}
}
