// Calico's NetworkSet (namespaced) and GlobalNetworkSet hold the CIDRs a
// Calico policy selects by label: spec.nets. They are followed as CIDR groups
// are: the pooled prefixes' CIDRs (or the annotated range's or subnet's)
// beside the user's nets, which are kept, with the existing operator's
// managed-cidrs record. Calico's Go module is not imported (its API package
// pulls in its whole client); spec.nets is a list of strings.

package backends

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// The network set resources, in crd.projectcalico.org/v1 as every Calico
// install serves them.
const (
	NetworkSetResource       = "networksets"
	GlobalNetworkSetResource = "globalnetworksets"
)

// CalicoNetworkSetKinds returns the NetworkSet and GlobalNetworkSet kinds the
// API server serves.
func CalicoNetworkSetKinds(disc Discovery) ([]*Kind, error) {
	return familyOf("crd.projectcalico.org").discover(disc, nil)
}

func networkSetKinds() []*Kind {
	var out []*Kind
	for _, k := range []struct {
		name, resource string
		namespaced     bool
	}{{"NetworkSet", NetworkSetResource, true}, {"GlobalNetworkSet", GlobalNetworkSetResource, false}} {
		out = append(out, &Kind{
			Name: k.name, Resource: k.resource, Namespaced: k.namespaced, AllowList: true,
			RecordKey: dynamicprefix.AnnotationManagedCIDRs, Form: holdings.CIDRs,
			Entries: func(u *unstructured.Unstructured, _ string) ([]string, error) { return Strings(u, "spec", "nets") },
			Spec:    listSpec("nets"),
		})
	}
	return out
}
