// RenderCalico renders Calico IPPools that follow a DynamicPrefix. An IPPool
// holds one CIDR (spec.cidr), so the pool the user annotated holds the current
// prefix's entry, and each prefix still draining gets a sibling IPPool we
// create, own and delete (one for each part of it outside the current
// entry, when the two nest): a copy of the annotated pool's settings with that
// CIDR, disabled (no new allocations; addresses already handed out keep
// working - Calico's own way of retiring a pool). Names are derived from the
// CIDR, so a prefix coming back (A->B->A) finds its old sibling by name and
// never gets a second pool for the same CIDR. Writes go to the
// crd.projectcalico.org/v1 resource every Calico install serves.

package backends

import (
	"net/netip"
	"reflect"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

const (
	// CalicoResource is the IPPool resource.
	CalicoResource = "ippools"
	// LabelSiblingOf names, on a sibling, the annotated pool it copies.
	LabelSiblingOf = "dynamic-prefix.io/sibling-of"
	// CalicoLabelManagedBy marks the siblings we own.
	CalicoLabelManagedBy = "app.kubernetes.io/managed-by"
	CalicoManagedBy      = "renumber"
	// CalicoRecordKey records, on the annotated pool, the CIDR we wrote (the
	// existing operator's record).
	CalicoRecordKey = "dynamic-prefix.io/managed-cidr"
	// CalicoLegacyRecordKey is where renumber recorded it before: read when
	// CalicoRecordKey is absent, removed by the next write.
	CalicoLegacyRecordKey = dynamicprefix.AnnotationManagedBlock
	// LabelParentPool names, on a sibling the existing operator created, the
	// annotated pool it belongs to. Such siblings are adopted: kept while
	// their CIDR drains, deleted after.
	LabelParentPool = "dynamic-prefix.io/parent-pool"
)

// CalicoRecord returns the CIDR recorded on an annotated pool and whether there is
// a record (under CalicoRecordKey, else CalicoLegacyRecordKey).
func CalicoRecord(u *unstructured.Unstructured) (string, bool) {
	a := u.GetAnnotations()
	if v, ok := a[CalicoRecordKey]; ok {
		return v, true
	}
	v, ok := a[CalicoLegacyRecordKey]
	return v, ok
}

// CalicoParent is the annotated pool a sibling belongs to ("" when u is none).
func CalicoParent(u *unstructured.Unstructured) string {
	if l := u.GetLabels(); l[CalicoLabelManagedBy] == CalicoManagedBy && l[LabelSiblingOf] != "" {
		return l[LabelSiblingOf]
	}
	return u.GetLabels()[LabelParentPool]
}

// calicoResource is the IPPool resource, empty when not served. served is
// what Served returned for crd.projectcalico.org (Discover).
func calicoResource(served map[string]string) schema.GroupVersionResource {
	if served[CalicoResource] == "" {
		return schema.GroupVersionResource{}
	}
	return schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: served[CalicoResource], Resource: CalicoResource}
}

// CalicoSibling is a pool we own: one we created, or one the existing operator
// created.
func CalicoSibling(u *unstructured.Unstructured) bool { return CalicoParent(u) != "" }

// CalicoAdopted is a sibling the existing operator created.
func CalicoAdopted(u *unstructured.Unstructured) bool {
	return CalicoSibling(u) && u.GetLabels()[CalicoLabelManagedBy] != CalicoManagedBy
}

// CalicoPlan is what one annotated pool and its siblings should hold.
type CalicoPlan struct {
	// CIDR is the annotated pool's spec.cidr: the current prefix's entry.
	CIDR string
	// Siblings are the pools of the entries still draining.
	Siblings []CalicoPool
}

// CalicoPool is a sibling as it should be.
type CalicoPool struct {
	Name   string
	Labels map[string]string
	Spec   map[string]any
}

// RenderCalico plans the annotated pool parent of the DynamicPrefix dp for entries
// (CIDRs, current first).
func RenderCalico(parent *IPPool, dp string, entries []string) CalicoPlan {
	if len(entries) == 0 {
		return CalicoPlan{}
	}
	settings := parent.Settings
	plan := CalicoPlan{CIDR: entries[0]}
	named := map[string]bool{}
	for _, e := range siblingCIDRs(entries) {
		name := CalicoSiblingName(parent.Name(), e)
		if named[name] {
			continue
		}
		named[name] = true
		spec := map[string]any{}
		for k, v := range settings {
			spec[k] = v
		}
		spec["cidr"], spec["disabled"] = e, true
		plan.Siblings = append(plan.Siblings, CalicoPool{
			Name:   name,
			Labels: MadeFor(dp, map[string]string{CalicoLabelManagedBy: CalicoManagedBy, LabelSiblingOf: parent.Name()}),
			Spec:   spec,
		})
	}
	return plan
}

// siblingCIDRs are the CIDRs of the siblings for entries (current first):
// each draining entry without the part of it the current entry holds. A
// sibling over the current entry would lay its settings (natOutgoing,
// encapsulation) over the current prefix's pods, and
// renumber-writer-values refuses one (a stolen token's ghost, red team
// r10a); so a draining entry around the current one (DHCPv6-PD: a /56
// replaced by a /60 of it) keeps a sibling for each part outside it, and
// one inside it needs none - the annotated pool holds its addresses. An
// entry that is no CIDR is left as it is.
func siblingCIDRs(entries []string) []string {
	cur, err := netip.ParsePrefix(entries[0])
	var out []string
	for _, e := range entries[1:] {
		p, perr := netip.ParsePrefix(e)
		if err != nil || perr != nil {
			out = append(out, e)
			continue
		}
		for _, q := range outside(p.Masked(), cur.Masked()) {
			out = append(out, q.String())
		}
	}
	return out
}

// outside is p without cur: p when the two do not overlap, nothing when cur
// holds p, else the prefixes that with cur make up p - one for each bit
// between their lengths, the largest first.
func outside(p, cur netip.Prefix) []netip.Prefix {
	switch {
	case !p.Overlaps(cur):
		return []netip.Prefix{p}
	case cur.Bits() <= p.Bits():
		return nil
	}
	var out []netip.Prefix
	for bits := p.Bits() + 1; bits <= cur.Bits(); bits++ {
		half, _ := cur.Addr().Prefix(bits)
		b := half.Addr().AsSlice()
		b[(bits-1)/8] ^= 0x80 >> ((bits - 1) % 8)
		other, _ := netip.AddrFromSlice(b)
		out = append(out, netip.PrefixFrom(other, bits))
	}
	return out
}

func canonical(cidr string) string {
	if p, err := netip.ParsePrefix(cidr); err == nil {
		return p.String()
	}
	return cidr
}

var notName = regexp.MustCompile(`[^a-z0-9-]+`)

// CalicoSiblingName is the name of parent's sibling for cidr: the same for the same
// CIDR, whenever it comes back.
func CalicoSiblingName(parent, cidr string) string {
	n := parent + "-" + strings.Trim(notName.ReplaceAllString(strings.ToLower(cidr), "-"), "-")
	if len(n) > 253 {
		n = strings.TrimRight(n[:253], "-")
	}
	return n
}

// SameCalico reports whether the live sibling already is p. A sibling the existing
// operator created is when it holds p's CIDR: its other settings are as that
// operator chose them, and rewriting them is no reason for a write.
func SameCalico(live *IPPool, p CalicoPool) bool {
	if live.Adopted {
		return p.Spec["cidr"] == canonical(live.CIDR)
	}
	for k, v := range p.Labels {
		if live.Labels[k] != v {
			return false
		}
	}
	return reflect.DeepEqual(live.spec, normalJSON(p.Spec))
}
