package render

import (
	"net/netip"
	"slices"

	"github.com/renumber/renumber/internal/writer/model"
)

// Earlier is each prefix of named (a decision's Managed: the prefixes
// pooled, and those its previous status names, current and history) that
// handed out addresses before the current prefix, pooled[0]: one still
// draining, or one gone. One whose delegation meets the current one's is
// left out: where the /64 moved inside one delegation, its subnets' and
// ranges' addresses are handed out under both, and what its load balancer
// publishes there may be new.
func Earlier(m model.Model, pooled, named []netip.Prefix) []netip.Prefix {
	if len(pooled) == 0 {
		return nil
	}
	current := m.Delegation(pooled[0])
	var out []netip.Prefix
	for _, p := range named {
		if !m.Delegation(p).Overlaps(current) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Renumbered is each of published (canonical) that lies under a prefix of
// earlier (Earlier), as it was handed out, and renumbered onto each prefix
// of pooled: on the /64 itself, its host bits on the pooled /64; on a
// subnet or in a range of the delegation, its bits under the delegation, in
// the pooled prefix's delegation. One on the /64 that a subnet or range
// covers too (the /64 lies where the spec carves one) is renumbered both
// ways: where the /64 moves inside the delegation the two differ, and the
// load balancer's status does not say which placement it was handed out
// for. That is where the placement it was handed out for lies now, whatever
// the placement's names say: the load balancer gave that address to that
// object alone, before the current prefix was pooled - so before a
// tenant's own lbipam.cilium.io/ips could be granted an address on it ahead
// of the writer (HeldByEarlierStatus).
func Renumbered(m model.Model, published []string, earlier, pooled []netip.Prefix) []string {
	var out []string
	add := func(a netip.Addr) {
		if s := a.String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	move := func(a netip.Addr, from, to netip.Prefix) {
		if r, err := model.Splice(to, model.HostBits(a, from)); err == nil && from.Bits() == to.Bits() {
			add(r)
		}
	}
	for _, s := range published {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() {
			continue
		}
		for _, e := range earlier {
			onPrefix, carved := e.Contains(a), carvedAt(m, a, e)
			if !onPrefix && !carved {
				continue
			}
			add(a)
			for _, p := range pooled {
				if onPrefix {
					move(a, e, p)
				}
				if carved {
					move(a, m.Delegation(e), m.Delegation(p))
				}
			}
		}
	}
	return out
}

// carvedAt says whether a subnet or range of m, on p's delegation, holds a.
func carvedAt(m model.Model, a netip.Addr, p netip.Prefix) bool {
	for _, s := range m.Subnets {
		if sub, err := m.Subnet(s.Name, p); err == nil && sub.Contains(a) {
			return true
		}
	}
	for _, r := range m.Ranges {
		if first, last, err := m.Range(r.Name, p); err == nil && !a.Less(first) && !last.Less(a) {
			return true
		}
	}
	return false
}

// Under is each of ips (canonical) in the delegation of a prefix of earlier.
func Under(m model.Model, ips []string, earlier []netip.Prefix) []string {
	var out []string
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err == nil && slices.ContainsFunc(earlier, func(e netip.Prefix) bool { return m.Delegation(e).Contains(a) }) {
			out = append(out, s)
		}
	}
	return out
}
