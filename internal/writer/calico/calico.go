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
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/backend"
	"github.com/renumber/renumber/internal/writer/dynamicprefix"
)

const (
	// Resource is the IPPool resource.
	Resource = "ippools"
	// LabelSiblingOf names, on a sibling, the annotated pool it copies.
	LabelSiblingOf = "dynamic-prefix.io/sibling-of"
	// LabelManagedBy marks the siblings we own.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "renumber"
	// RecordKey records, on the annotated pool, the CIDR we wrote.
	RecordKey = dynamicprefix.AnnotationManagedBlock
)

// Discover returns the IPPool resource, empty when not served.
func Discover(disc backend.Discovery) (schema.GroupVersionResource, error) {
	served, err := backend.Served(disc, "crd.projectcalico.org", "v1")
	if err != nil || served[Resource] == "" {
		return schema.GroupVersionResource{}, err
	}
	return schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: served[Resource], Resource: Resource}, nil
}

// Sibling is a pool we own.
func Sibling(u *unstructured.Unstructured) bool {
	return u.GetLabels()[LabelManagedBy] == ManagedBy && u.GetLabels()[LabelSiblingOf] != ""
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

// Same reports whether the live sibling already is p.
func Same(live *unstructured.Unstructured, p Pool) bool {
	for k, v := range p.Labels {
		if live.GetLabels()[k] != v {
			return false
		}
	}
	spec, _, _ := unstructured.NestedMap(live.Object, "spec")
	return backend.SameJSON(spec, p.Spec)
}
