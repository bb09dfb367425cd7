// Package metallb describes MetalLB's IPAddressPool as a backend.Kind. MetalLB's Go
// module is not imported (it would pull in its controllers): spec.addresses is a
// list of strings, each "start-end" or a CIDR, read and written as such.
package metallb

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backend"
)

// Resource is the IPAddressPool resource.
const Resource = "ipaddresspools"

// Kinds returns the IPAddressPool kind if the API server serves it.
func Kinds(disc backend.Discovery) ([]*backend.Kind, error) {
	served, err := backend.Served(disc, "metallb.io", "v1beta1")
	if err != nil {
		return nil, err
	}
	v, ok := served[Resource]
	if !ok {
		return nil, nil
	}
	return []*backend.Kind{{
		Name: "IPAddressPool", Resource: Resource, Namespaced: true,
		GVR:       schema.GroupVersionResource{Group: "metallb.io", Version: v, Resource: Resource},
		RecordKey: dynamicprefix.AnnotationManagedAddresses,
		Entries:   func(u *unstructured.Unstructured, _ string) ([]string, error) { return entries(u) },
		Spec: func(_ string, entries []string) (map[string]any, error) {
			out := make([]any, len(entries))
			for i, e := range entries {
				out[i] = e
			}
			return map[string]any{"addresses": out}, nil
		},
	}}, nil
}

// entries reads spec.addresses verbatim (user entries are written back as the
// user wrote them; comparisons use pool.Canonical, which ignores spaces).
func entries(u *unstructured.Unstructured) ([]string, error) {
	raw, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "addresses")
	if err != nil || !found {
		return nil, err
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("spec.addresses is %T, not a list", raw)
	}
	var out []string
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("spec.addresses holds %T, not a string", e)
		}
		out = append(out, s)
	}
	return out, nil
}
