package e2e

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

var addressPoolGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}

// TestMetalLBInstalledLater: a writer started on a cluster without MetalLB picks
// up MetalLB's IPAddressPool (its real CRD) when it is installed, without a
// restart, and keeps it in step like a Cilium pool: the user's range and CIDR kept
// verbatim, one patch per change, the record in managed-addresses.
func TestMetalLBInstalledLater(t *testing.T) {
	w := homeWorld(t, 1)
	ctx := t.Context()
	startAgent(t, w, "node1")
	writer := startWriter(t, w, "writer-a")
	eventually(t, "Cilium pool follows A", func() (bool, string) {
		b := blocks(t, w, "lb")
		return slices.Contains(b, prefixA.String()), fmt.Sprint(b)
	})

	if err := w.API.InstallMetalLB(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.API.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "metallb-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pools := w.API.Dynamic.Resource(addressPoolGVR).Namespace("metallb-system")
	user := []any{"192.0.2.10 - 192.0.2.20", "198.51.100.0/24"}
	if _, err := pools.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
		"metadata": map[string]any{"name": "home", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"addresses": user},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addresses := func() ([]string, string) {
		u, err := pools.Get(ctx, "home", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "addresses")
		return list, u.GetAnnotations()[dynamicprefix.AnnotationManagedAddresses]
	}
	follows := func(p string) {
		t.Helper()
		eventually(t, "IPAddressPool follows "+p, func() (bool, string) {
			got, rec := addresses()
			return slices.Equal(got, []string{"192.0.2.10 - 192.0.2.20", "198.51.100.0/24", p}) && rec == p,
				fmt.Sprintf("addresses %q record %q", got, rec)
		})
	}
	follows(prefixA.String())
	waitLog(t, w, "writer-a.log", "pool kind served; following it kind=IPAddressPool", 1)

	settleWrites()
	m := mark(t, w)
	advertise(t, w, prefixB, prefixA)
	eventually(t, "IPAddressPool has B", func() (bool, string) {
		got, _ := addresses()
		return slices.Contains(got, prefixB.String()), fmt.Sprint(got)
	})
	settleWrites()
	var patches []string
	for _, wr := range writesBy(t, w, m, writerUser) {
		if wr.Resource == "ipaddresspools" {
			patches = append(patches, wr.String())
		}
	}
	if len(patches) != 1 {
		t.Errorf("IPAddressPool writes for one change: %q, want exactly one patch", patches)
	}
	if got, _ := addresses(); !slices.Contains(got, "192.0.2.10 - 192.0.2.20") || !slices.Contains(got, "198.51.100.0/24") {
		t.Errorf("user entries not kept verbatim: %q", got)
	}
	if !alive(writer.Process.Pid) {
		t.Error("the writer exited")
	}
}
