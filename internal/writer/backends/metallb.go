// MetalLBKinds describes MetalLB's IPAddressPool as a Kind. MetalLB's Go
// module is not imported (it would pull in its controllers): spec.addresses is a
// list of strings, each "start-end" or a CIDR, read and written as such.

package backends

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// MetalLBResource is the IPAddressPool resource.
const MetalLBResource = "ipaddresspools"

// MetalLBKinds returns the IPAddressPool kind if the API server serves it.
func MetalLBKinds(disc Discovery) ([]*Kind, error) { return familyOf("metallb.io").discover(disc, nil) }

func metallbKind() *Kind {
	return &Kind{
		Name: "IPAddressPool", Resource: MetalLBResource, Namespaced: true,
		RecordKey: dynamicprefix.AnnotationManagedAddresses,
		Entries:   func(u *unstructured.Unstructured, _ string) ([]string, error) { return metallbEntries(u) },
		Spec:      listSpec("addresses"),
	}
}

// metallbEntries reads spec.addresses verbatim (user entries are written back as the
// user wrote them; comparisons use holdings.Canonical, which ignores spaces).
func metallbEntries(u *unstructured.Unstructured) ([]string, error) {
	return Strings(u, "spec", "addresses")
}
