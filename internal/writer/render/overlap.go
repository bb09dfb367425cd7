package render

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"
)

// PrefixOverlap is the condition (True, and a Warning event) of a
// DynamicPrefix whose addresses overlap another's: each weighs only the
// claims of the Services and Gateways following it (apply.Writer.Services
// gets one spec), so two of them, one following each, may be given one
// address - the load balancer then decides who answers it. Reported, not
// weighed: the fix is the admin's (one DynamicPrefix per prefix, or subnets
// and ranges of their own).
const PrefixOverlap = "PrefixOverlap"

// Space is where a DynamicPrefix hands out addresses from: each of pooled
// and, with a delegation (spec delegatedPrefixLength), the delegation it is
// part of (its subnets and ranges lie there).
func Space(m model.Model, pooled []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range pooled {
		for _, q := range []netip.Prefix{p.Masked(), m.Delegation(p)} {
			if q.IsValid() && !slices.Contains(out, q) {
				out = append(out, q)
			}
		}
	}
	return out
}

// StatusSpace is Space as another DynamicPrefix's status names it: its
// current prefix and the draining ones of its history, with the
// delegations the status names.
func StatusSpace(st api.Status) []netip.Prefix {
	named := []string{st.CurrentPrefix, st.DelegatedPrefix}
	for _, h := range st.History {
		if h.State == model.StateActive || h.State == model.StateDraining {
			named = append(named, h.Prefix, h.DelegatedPrefix)
		}
	}
	var out []netip.Prefix
	for _, s := range named {
		if p, err := netip.ParsePrefix(s); err == nil && !slices.Contains(out, p.Masked()) {
			out = append(out, p.Masked())
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
