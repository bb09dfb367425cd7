package controller

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/caches"
	"github.com/renumber/renumber/internal/writer/render"
)

// Overlapping is, of dps (a DynamicPrefix cache's list) but name and those
// being deleted, the DynamicPrefixes that can hand out an address space
// holds (render.Overlapping; each one's space from its spec and the
// prefixes its status names pooled, render.SpaceOf).
func Overlapping(dps []any, name string, space []netip.Prefix) []render.Overlap {
	others := map[string][]netip.Prefix{}
	for _, o := range dps {
		u, ok := caches.Unwrap(o).(*unstructured.Unstructured)
		if !ok || u.GetName() == name || u.GetDeletionTimestamp() != nil {
			continue
		}
		if dp, err := api.FromUnstructured(u); err == nil {
			others[u.GetName()] = render.SpaceOf(u.GetName(), dp)
		}
	}
	return render.Overlapping(space, others)
}
