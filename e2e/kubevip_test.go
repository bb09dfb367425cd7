package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/tools/world"
)

// TestKubeVIP: with the opt-in Role of manifests/kube-vip and
// --kube-vip-configmap, the key of kube-vip's pool ConfigMap that its
// annotation names follows the prefix ("first-last" ranges under a range-*
// key), no other key and no other ConfigMap is touched, HA Services choosing
// kube-vip get their addresses under kube-vip.io/loadbalancerIPs, a Service
// switching provider moves our addresses, and deleting the DynamicPrefix
// releases all of it. The contract (keys, formats, the Service annotation) is
// kube-vip-cloud-provider's README; its controller does not build here.
func TestKubeVIP(t *testing.T) {
	w := kubeVIPWorld(t)
	ctx := t.Context()
	configMaps := w.API.Client.CoreV1().ConfigMaps("kube-system")
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "kubevip", Annotations: map[string]string{"dynamic-prefix.io/name": "home",
			"dynamic-prefix.io/address-range": "lb", backends.AnnotationKubeVIPKey: "range-global"}},
			Data: map[string]string{"range-global": "192.0.2.100-192.0.2.110", "cidr-default": "198.51.100.0/28"}},
		// Names the DynamicPrefix too, but is not the ConfigMap the writer
		// was told of (and RBAC allows it no other).
		{ObjectMeta: metav1.ObjectMeta{Name: "other", Annotations: map[string]string{"dynamic-prefix.io/name": "home",
			backends.AnnotationKubeVIPKey: "cidr-global"}}, Data: map[string]string{"cidr-global": "192.0.2.0/28"}},
	} {
		if _, err := configMaps.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createService(t, w, "vip", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1",
		holdings.AnnotationProvider: "kube-vip", holdings.AnnotationSkipDNS: "true"})
	createService(t, w, "moving", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:2",
		holdings.AnnotationSkipDNS: "true", holdings.AnnotationIPs: "192.0.2.7", holdings.AnnotationKubeVIPIPs: "192.0.2.8"})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a", "--kube-vip-configmap", backends.DefaultKubeVIPConfigMap)

	poolIs := func(want map[string]string) {
		t.Helper()
		eventually(t, fmt.Sprintf("kubevip data %v", want), func() (bool, string) {
			cm, err := configMaps.Get(ctx, "kubevip", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return fmt.Sprint(cm.Data) == fmt.Sprint(want), fmt.Sprint(cm.Data)
		})
	}
	serviceIs := func(name string, want map[string]string) {
		t.Helper()
		eventually(t, name+" addresses", func() (bool, string) {
			s, err := w.API.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for k, v := range want {
				if got, ok := s.Annotations[k]; got != v || (v == "" && ok) {
					return false, fmt.Sprintf("%s = %q, want %q", k, got, v)
				}
			}
			return true, ""
		})
	}
	kvKey := map[string]string{holdings.AnnotationManagedIPsKey: holdings.AnnotationKubeVIPIPs}
	with := func(a, b map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range []map[string]string{a, b} {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}

	poolIs(map[string]string{"cidr-default": "198.51.100.0/28", "range-global": "192.0.2.100-192.0.2.110," + rangeOf(prefixA.String())})
	serviceIs("vip", with(kvKey, map[string]string{holdings.AnnotationKubeVIPIPs: on(t, prefixA, "::ffff:0:1"), holdings.AnnotationIPs: ""}))
	serviceIs("moving", map[string]string{holdings.AnnotationIPs: "192.0.2.7," + on(t, prefixA, "::ffff:0:2"),
		holdings.AnnotationKubeVIPIPs: "192.0.2.8", holdings.AnnotationManagedIPsKey: ""})
	settleWrites()

	m := mark(t, w)
	advertise(t, w, prefixB, prefixA)
	poolIs(map[string]string{"cidr-default": "198.51.100.0/28", "range-global": "192.0.2.100-192.0.2.110," + rangeOf(prefixB.String()) + "," + rangeOf(prefixA.String())})
	serviceIs("vip", with(kvKey, map[string]string{holdings.AnnotationKubeVIPIPs: on(t, prefixB, "::ffff:0:1") + "," + on(t, prefixA, "::ffff:0:1")}))
	settleWrites()
	want := []string{"patch configmaps kubevip 200", "patch dynamicprefixes/status home 200", "patch services moving 200", "patch services vip 200"}
	if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
		t.Errorf("a renumbering wrote %q, want %q", got, want)
	}

	m = mark(t, w)
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:"kube-vip"}}}`, holdings.AnnotationProvider)
	if _, err := w.API.Client.CoreV1().Services("default").Patch(ctx, "moving", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	serviceIs("moving", with(kvKey, map[string]string{holdings.AnnotationIPs: "192.0.2.7",
		holdings.AnnotationKubeVIPIPs: "192.0.2.8," + on(t, prefixB, "::ffff:0:2") + "," + on(t, prefixA, "::ffff:0:2")}))
	if got, want := serviceWrites(t, w, m), []string{"patch services moving 200"}; !slices.Equal(got, want) {
		t.Errorf("switching provider wrote %q, want %q", got, want)
	}

	m = mark(t, w)
	if err := w.API.Dynamic.Resource(api.GVR).Delete(ctx, "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poolIs(map[string]string{"cidr-default": "198.51.100.0/28", "range-global": "192.0.2.100-192.0.2.110"})
	serviceIs("vip", map[string]string{holdings.AnnotationKubeVIPIPs: "", holdings.AnnotationManagedIPsKey: "", holdings.AnnotationManagedIPs: ""})
	serviceIs("moving", map[string]string{holdings.AnnotationIPs: "192.0.2.7", holdings.AnnotationKubeVIPIPs: "192.0.2.8", holdings.AnnotationManagedIPsKey: ""})
	settleWrites()
	want = []string{"patch configmaps kubevip 200", "patch services moving 200", "patch services vip 200"}
	if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
		t.Errorf("releasing wrote %q, want %q", got, want)
	}
	if cm, _ := configMaps.Get(ctx, "other", metav1.GetOptions{}); cm.Data["cidr-global"] != "192.0.2.0/28" {
		t.Errorf("a ConfigMap the writer was not told of was touched: %v", cm.Data)
	}
}

// kubeVIPWorld is one node on prefixA with the opt-in Role of
// manifests/kube-vip and home, an HA DynamicPrefix with the address range
// lb (::f000:0:0:0 to the end of the /64).
func kubeVIPWorld(t *testing.T) *world.World {
	t.Helper()
	w := newWorld(t, 1)
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.API.Apply(t.Context(), filepath.Join(repo, "manifests", "kube-vip", "rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{
		"transition":    map[string]any{"mode": "ha"},
		"addressRanges": []any{map[string]any{"name": "lb", "start": "::f000:0:0:0", "end": "::ffff:ffff:ffff:ffff"}},
	})
	return w
}
