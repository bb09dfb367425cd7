package render

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

// PrefixOverlap is the condition (True, and a Warning event) of a
// DynamicPrefix that can hand out an address another can too (Space): each
// weighs only the claims of the Services and Gateways following it
// (apply.Writer.Services gets one spec), so two of them, one following
// each, may be given one address - the load balancer then decides who
// answers it. Reported, not weighed: the fix is the admin's (one
// DynamicPrefix per prefix, or subnets and ranges of their own).
const PrefixOverlap = "PrefixOverlap"

// Space is where a DynamicPrefix can hand out addresses from: on each of
// pooled, the prefix itself (an object following it with no subnet or
// range is placed there) and each subnet and address range its spec names,
// each placed as the writer places a pool's entries (PoolEntries: in the
// delegation the prefix is part of; a range as its covering CIDR, as the
// CIDR-only kinds hold it, which also holds every address a Service is
// given in it). Not the whole delegation: two DynamicPrefixes with subnets
// and ranges of their own in one /56 share no address. A placement that
// does not fit a prefix hands out nothing there (the pass reports it).
func Space(m model.Model, pooled []netip.Prefix) []netip.Prefix {
	placements := []holdings.PoolFollow{{}}
	for _, s := range m.Subnets {
		placements = append(placements, holdings.PoolFollow{Subnet: s.Name})
	}
	for _, r := range m.Ranges {
		placements = append(placements, holdings.PoolFollow{AddressRange: r.Name})
	}
	var out []netip.Prefix
	for _, p := range pooled {
		for _, f := range placements {
			e, err := entry(m, f, p, holdings.CIDRs)
			if err != nil {
				continue
			}
			if q, err := netip.ParsePrefix(e); err == nil && !slices.Contains(out, q) {
				out = append(out, q)
			}
		}
	}
	return out
}

// SpaceOf is Space of another DynamicPrefix, name, as the cache shows it:
// its spec, and what its status names pooled (StatusPooled) - computed as a
// pass computes its own from its decision.
func SpaceOf(name string, dp *api.DynamicPrefix) []netip.Prefix {
	return Space(model.Parse(name, dp.Spec), StatusPooled(dp.Status))
}

// StatusPooled is what st names pooled: its current prefix and every one of
// its history but the expired (decide.Pooled, as a decision's Pooled is).
func StatusPooled(st api.Status) []netip.Prefix {
	var out []netip.Prefix
	if p, err := netip.ParsePrefix(st.CurrentPrefix); err == nil {
		out = append(out, p)
	}
	for _, p := range decide.Pooled(Prior(st).History) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Overlapping is, sorted, the names in others (name -> its space) whose
// space shares an address with space.
func Overlapping(space []netip.Prefix, others map[string][]netip.Prefix) []string {
	var out []string
	for name, theirs := range others {
		if slices.ContainsFunc(space, func(p netip.Prefix) bool { return slices.ContainsFunc(theirs, p.Overlaps) }) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// OverlapMessage is PrefixOverlap's message, naming the others.
func OverlapMessage(others []string) string {
	return "the addresses of DynamicPrefix " + strings.Join(others, ", ") + " overlap this one's: neither weighs the other's Services' and Gateways' claims, so two objects following different DynamicPrefixes may be given one address; give each its own prefix, or subnets and ranges of its own"
}
