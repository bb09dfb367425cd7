package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

// TestAServiceLetGoWhileItsDynamicPrefixLivesLosesItsAddress: the admin
// stops letting the Service's namespace follow (spec.serviceNamespaces),
// then puts the DynamicPrefix back to transition mode simple. Each time the
// writer's release is admitted by the shipped policies: the Service loses
// renumber's address, keeps the user's, and keeps its records, emptied.
// Before, the writer removed the records, renumber-writer-values refused
// that while the DynamicPrefix lives, and the address stayed for good.
func TestAServiceLetGoWhileItsDynamicPrefixLivesLosesItsAddress(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createNamespace(t, w, "team")
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}, "serviceNamespaces": []any{"default", "team"}})
	follow := func(suffix string) map[string]string {
		return map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: suffix,
			holdings.AnnotationSkipDNS: "true", holdings.AnnotationIPs: "192.0.2.7"}
	}
	createServiceIn(t, w, "team", "web", follow("::ffff:0:1"))
	createService(t, w, "api", follow("::ffff:0:2"))
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	on := func(suffix string) string {
		a, err := model.Splice(prefixA, netip.MustParseAddr(suffix))
		if err != nil {
			t.Fatal(err)
		}
		return a.String()
	}
	expect := func(what, ns, name string, ips []string, record string) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			s, err := w.API.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got := holdings.Split(s.Annotations[holdings.AnnotationIPs])
			slices.Sort(got)
			rec, ok := s.Annotations[holdings.AnnotationManagedIPs]
			return slices.Equal(got, ips) && ok && rec == record, fmt.Sprintf("addresses %v, record %q (present %v)", got, rec, ok)
		})
	}
	patchDP := func(patch string) {
		t.Helper()
		if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expect("web given its address", "team", "web", []string{"192.0.2.7", on("::ffff:0:1")}, on("::ffff:0:1"))
	expect("api given its address", "default", "api", []string{"192.0.2.7", on("::ffff:0:2")}, on("::ffff:0:2"))

	patchDP(`{"spec":{"serviceNamespaces":["default"]}}`)
	expect("web let go: the user's address alone, its record emptied", "team", "web", []string{"192.0.2.7"}, "")
	expect("api untouched", "default", "api", []string{"192.0.2.7", on("::ffff:0:2")}, on("::ffff:0:2"))

	patchDP(`{"spec":{"transition":{"mode":"simple"}}}`)
	expect("api let go in transition mode simple", "default", "api", []string{"192.0.2.7"}, "")
}
