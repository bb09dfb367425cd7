// The stand-in: behind NPTv6 a router may advertise the ISP's prefix with
// preferred lifetime 0 beside the ULA, so that hosts do not use it as a
// source. On a link whose DynamicPrefixes follow such a prefix
// (routerAdvertisement.followDeprecated), one deprecated prefix is reported
// as preferred - it votes - while no router prefers an acceptable prefix
// there:
//   - only prefixes the senior router advertises (the first still
//     advertising that the agent heard: the home router, as far as it can
//     tell) and the link's policy accepts: a host that starts advertising
//     later never stands in, whatever lifetime it offers;
//   - the one with the longest valid lifetime left: a router renumbering
//     advertises the new prefix with its whole valid lifetime, the old one
//     with what is left of it (or withdraws it);
//   - the one standing in stays unless another has standInMargin more, so
//     two prefixes advertised alike do not take turns.

package observe

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/renumber/renumber/internal/digest"
)

// standInMargin is how much longer another prefix's valid lifetime must run
// than the stand-in's to replace it.
const standInMargin = time.Minute

// standIn returns the prefix that stands in on link name, if any, and
// remembers it.
func (s *State) standIn(name string, l *link, byPrefix map[netip.Prefix]*seen, now time.Time) (netip.Prefix, bool) {
	pol := s.policies[name]
	if !pol.FollowDeprecated {
		l.standIn = netip.Prefix{}
		return netip.Prefix{}, false
	}
	left := map[netip.Prefix]time.Duration{}
	for k, lt := range l.ra {
		if pol.Check(name, k.prefix) != nil || lt.valid.passed(now) {
			continue
		}
		if byPrefix[k.prefix].raPreferred {
			l.standIn = netip.Prefix{} // a router prefers an acceptable prefix: it votes itself
			return netip.Prefix{}, false
		}
		if s.Senior(name, k.router) {
			left[k.prefix] = max(left[k.prefix], lt.valid.remaining(now))
		}
	}
	best := netip.Prefix{}
	for _, p := range slices.SortedFunc(maps.Keys(left), digest.ComparePrefix) {
		if !best.IsValid() || left[p] > left[best] {
			best = p
		}
	}
	if kept, ok := left[l.standIn]; ok && left[best] < kept+standInMargin {
		best = l.standIn
	}
	l.standIn = best
	return best, best.IsValid()
}
