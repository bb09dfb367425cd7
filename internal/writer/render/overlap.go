package render

import (
	"fmt"
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

// Overlap is another DynamicPrefix whose space shares addresses with a
// DynamicPrefix's, and where: of each two placements that meet, the longer
// (it lies in the other), the outermost of them, sorted.
type Overlap struct {
	Name string
	On   []netip.Prefix
}

// Equal reports whether o and p name one DynamicPrefix on the same places.
func (o Overlap) Equal(p Overlap) bool { return o.Name == p.Name && slices.Equal(o.On, p.On) }

// Overlapping is, sorted by name, the DynamicPrefixes in others (name ->
// its space) whose space shares an address with space, and where.
func Overlapping(space []netip.Prefix, others map[string][]netip.Prefix) []Overlap {
	var out []Overlap
	for name, theirs := range others {
		var on []netip.Prefix
		for _, p := range space {
			for _, q := range theirs {
				if !p.Overlaps(q) {
					continue
				}
				if q.Bits() > p.Bits() {
					p, q = q, p
				}
				if !slices.Contains(on, p) {
					on = append(on, p)
				}
			}
		}
		// A place inside another named says nothing more.
		on = slices.DeleteFunc(slices.Clone(on), func(p netip.Prefix) bool {
			return slices.ContainsFunc(on, func(q netip.Prefix) bool { return q.Bits() < p.Bits() && q.Contains(p.Addr()) })
		})
		if len(on) > 0 {
			slices.SortFunc(on, netip.Prefix.Compare)
			out = append(out, Overlap{Name: name, On: on})
		}
	}
	slices.SortFunc(out, func(a, b Overlap) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// overlapPlaces is how many places of each overlap a message names (a
// condition's message is bounded).
const overlapPlaces = 3

// OverlapMessage is PrefixOverlap's message, naming the others and where
// they meet this one.
func OverlapMessage(others []Overlap) string {
	var names []string
	for _, o := range others {
		var on []string
		for _, p := range o.On[:min(len(o.On), overlapPlaces)] {
			on = append(on, p.String())
		}
		if more := len(o.On) - overlapPlaces; more > 0 {
			on = append(on, fmt.Sprintf("%d more", more))
		}
		names = append(names, o.Name+" (on "+strings.Join(on, ", ")+")")
	}
	return "the addresses of DynamicPrefix " + strings.Join(names, ", ") + " overlap this one's: neither weighs the other's Services' and Gateways' claims, so two objects following different DynamicPrefixes may be given one address; give each its own prefix (two that follow one link share its prefix, where an object following either with no subnet or range is placed), or subnets and ranges of its own"
}
