package api

import (
	"cmp"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Space is every prefix the statuses of dps (a DynamicPrefix cache's
// objects) name - current, delegated and each history entry's, expired
// ones too - sorted: what renumber handed out addresses from or may hand
// them out from now. A cache keeps only the addresses in it of what a load
// balancer publishes past its bound (holdings.BoundedIn): one outside can
// never be an address renumber gives. An object whose status does not read
// adds nothing.
func Space(dps []any) []netip.Prefix {
	out := []netip.Prefix{}
	add := func(s string) {
		if p, err := netip.ParsePrefix(s); err == nil && !slices.Contains(out, p.Masked()) {
			out = append(out, p.Masked())
		}
	}
	for _, o := range dps {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		dp, err := FromUnstructured(u)
		if err != nil {
			continue
		}
		add(dp.Status.CurrentPrefix)
		add(dp.Status.DelegatedPrefix)
		for _, h := range dp.Status.History {
			add(h.Prefix)
			add(h.DelegatedPrefix)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	return out
}

// Covers reports whether every address of every prefix of b lies in a
// prefix of a (nil a: everything).
func Covers(a, b []netip.Prefix) bool {
	if a == nil {
		return true
	}
	for _, p := range b {
		if !slices.ContainsFunc(a, func(q netip.Prefix) bool { return q.Bits() <= p.Bits() && q.Contains(p.Addr()) }) {
			return false
		}
	}
	return true
}
