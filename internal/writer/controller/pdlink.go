package controller

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/caches"
	"github.com/renumber/renumber/internal/writer/model"
)

// PDClients parses, of dps (a DynamicPrefix cache's list), every
// DynamicPrefix in mode client (the agents' own DHCPv6 client) but name and
// those being deleted: what model.LinkTakenBy compares a DynamicPrefix with.
func PDClients(dps []any, name string) []model.Model {
	var out []model.Model
	for _, o := range dps {
		u, ok := caches.Unwrap(o).(*unstructured.Unstructured)
		if !ok || u.GetName() == name || u.GetDeletionTimestamp() != nil {
			continue
		}
		dp, err := api.FromUnstructured(u)
		if err != nil {
			continue
		}
		if m := model.Parse(u.GetName(), dp.Spec); m.DHCPv6PD && m.PDClient {
			out = append(out, m)
		}
	}
	return out
}

// TakenBy is m's model.Model.PDTakenBy among dps (a DynamicPrefix cache's
// list): the DynamicPrefix, first by name, whose client the agents run on
// m's interface instead of m's. The writer's pass and kubectl renumber
// status both ask it here, so that the two never differ.
func TakenBy(m model.Model, dps []any) string {
	return model.LinkTakenBy(m, PDClients(dps, m.Name))
}

// pdLinkChanged queues a pass over every other DynamicPrefix in mode client
// when name was added, changed or deleted: the first by name on a link may
// have changed (model.LinkTakenBy), and the other's pass alone sees it.
func (c *Controller) pdLinkChanged(name string) {
	for _, m := range PDClients(c.caches.DynamicPrefixes().List(), name) {
		c.enqueue(m.Name, 0)
	}
}
