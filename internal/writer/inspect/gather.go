package inspect

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/controller"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// Gather runs one shadow pass over each DynamicPrefix of p named (every one
// when none is; built with DryRun, its caches synced) and returns what Build
// needs.
func Gather(ctx context.Context, p *controller.Pipeline, lease *Lease, now time.Time, names ...string) Input {
	in := Input{Now: now, Lease: lease, Plan: map[string][]permit.Change{}, Answers: map[string][]decide.Report{}}
	c := p.Caches
	for _, o := range c.DynamicPrefixes().List() {
		u := o.(*unstructured.Unstructured)
		in.DynamicPrefixes = append(in.DynamicPrefixes, u)
		if len(names) > 0 && !slices.Contains(names, u.GetName()) {
			continue // not asked about: its servers are not asked either
		}
		if dp, err := api.FromUnstructured(u); err == nil {
			if m := model.Parse(u.GetName(), dp.Spec); m.DNS != nil && m.Err == nil {
				// Its servers are asked now, once: the pass counts these answers.
				in.Answers[u.GetName()] = p.Resolvers.Prime(ctx, u.GetName(), m.DNS)
			}
		}
		key := controller.Key{Action: controller.SyncDynamicPrefix, Name: u.GetName()}
		p.Controller.Sync(ctx, key)
		in.Plan[u.GetName()] = p.Plan.Of(key.String())
	}
	in.Votes, _ = p.Ballot.Votes(now)

	follow := func(dp, kind, resource string, u metav1.Object) {
		if dp != "" {
			in.Followers = append(in.Followers, Follower{DynamicPrefix: dp, Kind: kind,
				Object: resource + "/" + api.Key(u.GetNamespace(), u.GetName())})
		}
	}
	for _, pool := range c.Pools() {
		for _, o := range pool.Store.List() {
			if p, ok := o.(*backends.Pool); ok {
				follow(p.Follow.DynamicPrefix, pool.Kind.Name, pool.Kind.Resource, p.Live)
			}
		}
	}
	if ippools, _ := c.CalicoPools(); ippools.Store != nil {
		for _, o := range ippools.Store.List() {
			if p, ok := o.(*backends.IPPool); ok {
				follow(p.Follows, "Calico IPPool", backends.CalicoResource, p.Live)
			}
		}
	}
	if adverts, _ := c.Advertisements(); adverts.Store != nil {
		for _, o := range adverts.Store.List() {
			if a, ok := o.(*backends.CachedAdvertisement); ok {
				follow(a.MadeFor, "CiliumBGPAdvertisement", "ciliumbgpadvertisements", a.Live)
			}
		}
	}
	for _, o := range c.Services().List() {
		s, ok := o.(*holdings.CachedService)
		if !ok {
			continue
		}
		dp := s.Follow.DynamicPrefix
		follow(dp, "Service", "services", s)
		if s.Follow.Mapping != "" && dp != "" {
			in.Followers[len(in.Followers)-1].Mapping = mappings(c.DynamicPrefixes(), dp, s.Follow, s.Ingress)
		}
	}
	return in
}

// mappings says what the router maps a Service's published addresses to
// under DynamicPrefix dp's current prefix, or why it cannot be said.
func mappings(dps cache.Store, dp string, f holdings.ServiceFollow, ingress []string) []string {
	o, ok, _ := dps.GetByKey(dp)
	if !ok {
		return nil
	}
	d, err := api.FromUnstructured(o.(*unstructured.Unstructured))
	if err != nil {
		return nil
	}
	cur, err := netip.ParsePrefix(d.Status.CurrentPrefix)
	if err != nil {
		return []string{"nothing yet: no current prefix"}
	}
	mapped, err := render.Mapped(model.Parse(dp, d.Spec), f, cur, ingress)
	if err != nil {
		return []string{"nothing: " + err.Error()}
	}
	if len(mapped) == 0 {
		return []string{"nothing yet: the load balancer publishes no address in " + f.MappingPrefix}
	}
	var out []string
	for _, m := range mapped {
		out = append(out, fmt.Sprintf("%s -> %s (%s, %s onto %s)", m.Inside, m.Outside, f.Mapping, m.From, m.To))
	}
	return out
}
