// What the writer's caches keep of the addresses a load balancer publishes
// for one object (a Service's status.loadBalancer.ingress, a Gateway's
// status.addresses): a tenant decides how many there are (its own
// lbipam.cilium.io/ips), so the caches keep a bounded number whole and only
// a summary of the rest (red team r7a).

package holdings

import (
	"net/netip"
	"slices"
)

// MaxKeptPublished bounds the published addresses a cache keeps whole of one
// object.
const MaxKeptPublished = 64

// maxMore bounds the prefixes a cache keeps of the addresses past
// MaxKeptPublished (Bounded).
const maxMore = 8

// moreBits are the lengths Bounded summarises the addresses past
// MaxKeptPublished at, finest first: the first at which they fall in at
// most maxMore prefixes. A /112 names few addresses besides the one
// published (renumber's Service addresses differ in their last 64 bits), so
// a Service next to a tenant's surplus is seldom taken for its neighbour's.
// Past those, BoundedIn falls back on the prefixes of its space, Bounded
// on ::/0.
var moreBits = []int{112, 64}

// Bounded is BoundedIn with every address in its space: where the
// DynamicPrefixes' space is not known (nil), any address may be one
// renumber hands out.
func Bounded(published []string) (kept []string, more []netip.Prefix) {
	return BoundedIn(published, nil)
}

// BoundedIn is what a cache keeps of published (a load balancer's
// addresses for one object, in its order): the first MaxKeptPublished
// whole, and of the IPv6 addresses past them that lie in space (Space: what
// the DynamicPrefixes can hand out; nil: everything) only the prefixes they
// fall in ("more": the object publishes some address in each the cache did
// not keep): at most maxMore /112s, else /64s, else the prefixes of space
// that hold them (nil space: ::/0). Past the bound, an address outside
// space is dropped: it can never be an address renumber gives, and
// summarising it with the rest let a tenant spreading its surplus over nine
// /64s anywhere be taken to publish ::/0, every Service's address (red team
// r9b). An entry of published that is already a prefix (an object the
// cache bounded before: a list page, then the transform) is a "more" again,
// so BoundedIn of its own output in the same space changes nothing. Every
// address the object publishes in space is in kept or inside a prefix of
// more: who publishes an address renumber gives may be over-answered, never
// missed (render.Served's guard; red team r7a).
func BoundedIn(published []string, space []netip.Prefix) (kept []string, more []netip.Prefix) {
	var surplus []netip.Prefix
	inSpace := func(p netip.Prefix) bool {
		return space == nil || slices.ContainsFunc(space, p.Overlaps)
	}
	for _, e := range published {
		if p, err := netip.ParsePrefix(e); err == nil {
			if p = p.Masked(); inSpace(p) {
				surplus = append(surplus, p)
			}
			continue
		}
		if len(kept) < MaxKeptPublished {
			kept = append(kept, e)
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil && a.Is6() && !a.Is4In6() {
			if p := netip.PrefixFrom(a.WithZone(""), 128); inSpace(p) {
				surplus = append(surplus, p)
			}
		}
	}
	if len(surplus) == 0 {
		return kept, nil
	}
	for _, bits := range moreBits {
		if more = prefixesOf(surplus, bits); more != nil {
			return kept, more
		}
	}
	if space == nil {
		return kept, []netip.Prefix{netip.PrefixFrom(netip.IPv6Unspecified(), 0)}
	}
	for _, s := range space { // bounded by what the DynamicPrefixes pool, not by the tenant
		if s = s.Masked(); !slices.Contains(more, s) && slices.ContainsFunc(surplus, s.Overlaps) {
			more = append(more, s)
		}
	}
	return kept, more
}

// KeptPublished splits what a cache kept of published (BoundedIn's kept
// and more as one list: a Gateway's status as its cache keeps it) into the
// two. Bounding it again instead would not know its space: past maxMore of
// the space's prefixes, it would read as ::/0.
func KeptPublished(kept []string) (whole []string, more []netip.Prefix) {
	for _, e := range kept {
		if p, err := netip.ParsePrefix(e); err == nil {
			more = append(more, p.Masked())
		} else {
			whole = append(whole, e)
		}
	}
	return whole, more
}

// prefixesOf is the distinct prefixes of length bits (or shorter, as given)
// that surplus falls in, nil past maxMore: it stops there, so a tenant's
// thousands of addresses cost a pass over them, not their square.
func prefixesOf(surplus []netip.Prefix, bits int) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range surplus {
		if m := netip.PrefixFrom(p.Addr(), min(bits, p.Bits())).Masked(); !slices.Contains(out, m) {
			if len(out) == maxMore {
				return nil
			}
			out = append(out, m)
		}
	}
	return out
}

// MoreKeys are the keys a published-address index files addr (canonical)
// under for an object whose cache kept only a summary of it (BoundedIn's
// more): each prefix BoundedIn may have kept that holds it - its /112, and
// every prefix of it from its /64 to ::/0 (a prefix of the space: pooled
// prefixes and delegations are no longer than a /64).
func MoreKeys(addr string) []string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is6() {
		return nil
	}
	out := []string{MoreKey(netip.PrefixFrom(a.WithZone(""), moreBits[0]).Masked())}
	for bits := 64; bits >= 0; bits-- { // a /64, or a prefix of the space, or ::/0
		out = append(out, MoreKey(netip.PrefixFrom(a.WithZone(""), bits).Masked()))
	}
	return out
}

// MoreKey is the index key of a "more" prefix p (never an address's key).
func MoreKey(p netip.Prefix) string { return "more " + p.String() }

// AmongPublished reports whether addr (canonical) is among published as a
// cache keeps it (Bounded): an entry, or inside a prefix entry.
func AmongPublished(published []string, addr string) bool {
	a, err := netip.ParseAddr(addr)
	return slices.ContainsFunc(published, func(e string) bool {
		if p, perr := netip.ParsePrefix(e); perr == nil {
			return err == nil && p.Contains(a.WithZone(""))
		}
		return Canonical(e) == addr
	})
}
