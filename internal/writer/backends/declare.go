// The one list of what the writer follows. Discover reads it to ask the API
// server which kinds it serves; Declared reads it to say what those kinds
// need of the API, which a test holds the shipped RBAC, the chart's copies
// and the admission policies to (declare_test.go). A new pool kind is its
// backend file, one line in families, and its tests.

package backends

import (
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A family is the pool kinds of one API group, found in the versions given
// (later ones preferred); with no versions they are always served, in the
// version their GVR names. made, when set, reads from the same answer the
// resource of the group the writer creates objects of (Discovered).
type family struct {
	group    string
	versions []string
	kinds    func() []*Kind
	made     func(served map[string]string, s *Discovered)
}

// families lists every pool kind, in the order a pass meets them; kubeVIP,
// the ConfigMap followed ("" none), is the one kind a flag names.
func families(kubeVIP string) []family {
	out := []family{
		{group: "cilium.io", versions: []string{"v2alpha1", "v2"}, kinds: func() []*Kind { return []*Kind{poolKind(), groupKind()} },
			made: func(served map[string]string, s *Discovered) { s.BGP = bgpResource(served) }},
		{group: "metallb.io", versions: []string{"v1beta1"}, kinds: func() []*Kind { return []*Kind{metallbKind()} }},
	}
	if kubeVIP != "" {
		out = append(out, family{kinds: func() []*Kind { return []*Kind{KubeVIPKind(kubeVIP)} }})
	}
	return append(out,
		family{group: "crd.projectcalico.org", versions: []string{"v1"}, kinds: networkSetKinds,
			made: func(served map[string]string, s *Discovered) { s.Calico = calicoResource(served) }},
		family{group: "networking.k8s.io", kinds: func() []*Kind { return []*Kind{NetworkPolicyKind()} }},
		family{group: GatewayGroup, versions: []string{"v1"}, kinds: func() []*Kind { return []*Kind{GatewayKind("v1")} }},
	)
}

// discover returns the family's kinds the API server serves, and adds them
// and the resources made in its group to s (nil: the kinds only).
func (f family) discover(disc Discovery, s *Discovered) ([]*Kind, error) {
	if len(f.versions) == 0 {
		return f.kinds(), nil
	}
	served, err := Served(disc, f.group, f.versions...)
	if err != nil {
		return nil, err
	}
	if f.made != nil && s != nil {
		f.made(served, s)
	}
	return f.pick(served), nil
}

// pick returns the family's kinds in served (resource -> version, Served).
func (f family) pick(served map[string]string) []*Kind {
	var out []*Kind
	for _, k := range f.kinds() {
		if v, ok := served[k.Resource]; ok {
			k.GVR = schema.GroupVersionResource{Group: f.group, Version: v, Resource: k.Resource}
			out = append(out, k)
		}
	}
	return out
}

// familyOf is the family of group.
func familyOf(group string) family {
	i := slices.IndexFunc(families(""), func(f family) bool { return f.group == group })
	return families("")[i]
}

// Discovered is what the API server serves of what the writer follows: the pool
// kinds, and the resources it creates objects of.
type Discovered struct {
	Pools  []*Kind
	BGP    schema.GroupVersionResource // CiliumBGPAdvertisement; empty when not served
	Calico schema.GroupVersionResource // Calico's IPPool; empty when not served
}

// Discover returns what the API server serves, kube-vip's ConfigMap kubeVIP
// among the pool kinds when named, asking each version of each group once.
// A family that could not be asked for is left out and its error returned
// beside the others.
func Discover(disc Discovery, kubeVIP string) (Discovered, error) {
	var s Discovered
	var errs []error
	for _, f := range families(kubeVIP) {
		kinds, err := f.discover(disc, &s)
		s.Pools, errs = append(s.Pools, kinds...), append(errs, err)
	}
	return s, errors.Join(errs...)
}

// Groups are the API groups whose kinds are discovered: a CRD of one of them
// changing asks Discover again.
func Groups() []string {
	var out []string
	for _, f := range families("") {
		if len(f.versions) > 0 {
			out = append(out, f.group)
		}
	}
	return out
}

// Access is what the writer needs of one resource: the verbs its RBAC must
// grant it, and those renumber-reader grants whoever inspects what it wrote.
type Access struct {
	Name            string // the kind, for a test's message
	Group, Resource string
	// Only, when set, is the one object ("namespace/name") the writer may
	// touch: its Role names it. The policies hold that object as they hold
	// every pool: a Role that names it gives a stolen writer token all of it
	// (red team r9a).
	Only           string
	Writer, Reader []string
	// Pool: the writer patches the entries of objects others own, and the
	// sizes and values policies bound and check every one of its writes.
	Pool bool
}

var (
	readVerbs  = []string{"get", "list", "watch"}
	patchVerbs = []string{"get", "list", "watch", "patch"}
	ownVerbs   = []string{"get", "list", "watch", "create", "patch", "delete"}
)

// Access is what the kind needs: every pool kind is read, watched and
// merge-patched, never created or deleted. The one object a kind names (Only)
// is not the reader's: its ClusterRole could read it only with every other
// object of its resource (every ConfigMap, kube-vip's).
func (k *Kind) Access() Access {
	if k.Only != "" {
		return Access{Name: k.Name, Group: k.GVR.Group, Resource: k.Resource, Only: k.Only, Writer: patchVerbs, Pool: true}
	}
	return Access{Name: k.Name, Group: k.GVR.Group, Resource: k.Resource, Writer: patchVerbs, Reader: readVerbs, Pool: true}
}

// Declared is what every backend needs of the API: each pool kind (kube-vip's
// at its default ConfigMap), and the Calico IPPools and CiliumBGPAdvertisements
// the writer creates, patches and deletes.
func Declared() []Access {
	var out []Access
	for _, f := range families(DefaultKubeVIPConfigMap) {
		for _, k := range f.kinds() {
			if len(f.versions) > 0 {
				k.GVR = schema.GroupVersionResource{Group: f.group, Version: f.versions[len(f.versions)-1], Resource: k.Resource}
			}
			out = append(out, k.Access())
		}
	}
	return append(out,
		Access{Name: "Calico IPPool", Group: "crd.projectcalico.org", Resource: CalicoResource, Writer: ownVerbs, Reader: readVerbs},
		Access{Name: "CiliumBGPAdvertisement", Group: "cilium.io", Resource: bgpResourceName, Writer: ownVerbs, Reader: readVerbs},
	)
}
