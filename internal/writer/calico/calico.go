// Package calico renders Calico IPPools that follow a DynamicPrefix. An IPPool
// holds one CIDR (spec.cidr), so the pool the user annotated holds the current
// prefix's entry, and each prefix still draining gets a sibling IPPool we
// create, own and delete: a copy of the annotated pool's settings with that
// CIDR, disabled (no new allocations; addresses already handed out keep
// working - Calico's own way of retiring a pool). Names are derived from the
// CIDR, so a prefix coming back (A->B->A) finds its old sibling by name and
// never gets a second pool for the same CIDR. Writes go to the
// crd.projectcalico.org/v1 resource every Calico install serves.
package calico

import (
	"net/netip"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backend"
)

const (
	// Resource is the IPPool resource.
	Resource = "ippools"
	// LabelSiblingOf names, on a sibling, the annotated pool it copies.
	LabelSiblingOf = "dynamic-prefix.io/sibling-of"
	// LabelManagedBy marks the siblings we own.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "renumber"
	// RecordKey records, on the annotated pool, the CIDR we wrote (the
	// existing operator's record).
	RecordKey = "dynamic-prefix.io/managed-cidr"
	// LegacyRecordKey is where renumber recorded it before: read when
	// RecordKey is absent, removed by the next write.
	LegacyRecordKey = dynamicprefix.AnnotationManagedBlock
	// LabelParentPool names, on a sibling the existing operator created, the
	// annotated pool it belongs to. Such siblings are adopted: kept while
	// their CIDR drains, deleted after.
	LabelParentPool = "dynamic-prefix.io/parent-pool"
)

// Record returns the CIDR recorded on an annotated pool and whether there is
// a record (under RecordKey, else LegacyRecordKey).
func Record(u *unstructured.Unstructured) (string, bool) {
	a := u.GetAnnotations()
	if v, ok := a[RecordKey]; ok {
		return v, true
	}
	v, ok := a[LegacyRecordKey]
	return v, ok
}

// Parent is the annotated pool a sibling belongs to ("" when u is none).
func Parent(u *unstructured.Unstructured) string {
	if l := u.GetLabels(); l[LabelManagedBy] == ManagedBy && l[LabelSiblingOf] != "" {
		return l[LabelSiblingOf]
	}
	return u.GetLabels()[LabelParentPool]
}

// Discover returns the IPPool resource, empty when not served.
func Discover(disc backend.Discovery) (schema.GroupVersionResource, error) {
	served, err := backend.Served(disc, "crd.projectcalico.org", "v1")
	if err != nil || served[Resource] == "" {
		return schema.GroupVersionResource{}, err
	}
	return schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: served[Resource], Resource: Resource}, nil
}

// Sibling is a pool we own: one we created, or one the existing operator
// created.
func Sibling(u *unstructured.Unstructured) bool { return Parent(u) != "" }

// Adopted is a sibling the existing operator created.
func Adopted(u *unstructured.Unstructured) bool {
	return Sibling(u) && u.GetLabels()[LabelManagedBy] != ManagedBy
}

// Plan is what one annotated pool and its siblings should hold.
type Plan struct {
	// CIDR is the annotated pool's spec.cidr: the current prefix's entry.
	CIDR string
	// Siblings are the pools of the entries still draining.
	Siblings []Pool
}

// Pool is a sibling as it should be.
type Pool struct {
	Name   string
	Labels map[string]string
	Spec   map[string]any
}

// Render plans the annotated pool parent of the DynamicPrefix dp for entries
// (CIDRs, current first).
func Render(parent *unstructured.Unstructured, dp string, entries []string) Plan {
	if len(entries) == 0 {
		return Plan{}
	}
	settings, _, _ := unstructured.NestedMap(parent.Object, "spec")
	plan := Plan{CIDR: entries[0]}
	for _, e := range entries[1:] {
		spec := map[string]any{}
		for k, v := range settings {
			spec[k] = v
		}
		spec["cidr"], spec["disabled"] = e, true
		plan.Siblings = append(plan.Siblings, Pool{
			Name: SiblingName(parent.GetName(), e),
			Labels: map[string]string{LabelManagedBy: ManagedBy, LabelSiblingOf: parent.GetName(),
				dynamicprefix.AnnotationName: dp},
			Spec: spec,
		})
	}
	return plan
}

func canonical(cidr string) string {
	if p, err := netip.ParsePrefix(cidr); err == nil {
		return p.String()
	}
	return cidr
}

var notName = regexp.MustCompile(`[^a-z0-9-]+`)

// SiblingName is the name of parent's sibling for cidr: the same for the same
// CIDR, whenever it comes back.
func SiblingName(parent, cidr string) string {
	n := parent + "-" + strings.Trim(notName.ReplaceAllString(strings.ToLower(cidr), "-"), "-")
	if len(n) > 253 {
		n = strings.TrimRight(n[:253], "-")
	}
	return n
}

// Same reports whether the live sibling already is p. A sibling the existing
// operator created is when it holds p's CIDR: its other settings are as that
// operator chose them, and rewriting them is no reason for a write.
func Same(live *unstructured.Unstructured, p Pool) bool {
	if Adopted(live) {
		cidr, _, _ := unstructured.NestedString(live.Object, "spec", "cidr")
		return p.Spec["cidr"] == canonical(cidr)
	}
	for k, v := range p.Labels {
		if live.GetLabels()[k] != v {
			return false
		}
	}
	spec, _, _ := unstructured.NestedMap(live.Object, "spec")
	return backend.SameJSON(spec, p.Spec)
}
