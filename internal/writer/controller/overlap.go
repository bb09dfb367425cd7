package controller

import (
	"net/netip"
	"slices"

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

// notePooled notes what name's status, as the cache shows it now, names
// pooled (render.StatusPooled; forgotten once it is gone), and reports
// whether that moved since the cache's handlers last noted it (a
// renumbering, a drain's end; not the first sighting, whose own pass
// looks at every other). The others read this one's space from its
// status (render.SpaceOf): a pass over them that ran before the cache
// showed the write found what the status named before, and nothing would
// pass over them again - an overlap begun went unreported, and one ended
// stayed reported (PrefixOverlap).
func (c *Controller) notePooled(name string) (moved bool) {
	var pooled []netip.Prefix
	o, exists, _ := c.caches.DynamicPrefixes().GetByKey(name)
	if u, ok := o.(*unstructured.Unstructured); exists && ok {
		if dp, err := api.FromUnstructured(u); err == nil {
			pooled = render.StatusPooled(dp.Status)
		}
	}
	c.seeing.Lock()
	defer c.seeing.Unlock()
	was, seen := c.seeing.pooled[name]
	if !exists {
		delete(c.seeing.pooled, name)
		return false
	}
	if c.seeing.pooled == nil {
		c.seeing.pooled = map[string][]netip.Prefix{}
	}
	c.seeing.pooled[name] = pooled
	return seen && !slices.Equal(was, pooled)
}
