package agent

import (
	"net/netip"
	"slices"
	"time"

	"github.com/renumber/renumber/internal/digest"
)

// offer is a delegation a DHCPv6 server offered this node's prober (the
// writer named it confirmer), until its valid lifetime ends.
type offer struct {
	prefix netip.Prefix
	// valid is the longest valid lifetime the server stated for it in an
	// Advertise while the lifetime's end stayed put, as long as what it
	// states now is at least half of it: a server that states what is
	// left of the binding (counting down: the same end) leaves the digest
	// unchanged while a client renews it, and the bound it gives the
	// writer is one the server did state; one that shortens it (the end
	// moves earlier, as an operator lowers lifetimes before a renumbering)
	// is published at once. A count-down past half (nobody renewed: a
	// binding on its way to lapse) is published too - the writer counts
	// the lifetime from when it learns the server moved on, so the longest
	// kept a lapsed delegation one whole lifetime past the end the server
	// stated; now at most the half, one T1 (a write each time what is
	// left halves, only while nobody renews).
	valid time.Duration
	until time.Time // when the lifetime the server last stated ends
}

// countDownSlack is how much earlier a lifetime counted down may end than
// the one stated before it: servers state whole seconds.
const countDownSlack = 2 * time.Second

// Offered is the handler for the prober on link being offered p (removed:
// the offer ended or the prober stopped). Safe from any goroutine.
func (a *Agent) Offered(link string, p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
	a.events <- func() {
		a.log.Debug("delegation offered", "link", link, "prefix", p, "valid", valid, "removed", removed)
		if removed {
			if o, ok := a.offers[link]; ok && o.prefix == p {
				delete(a.offers, link)
			}
			return
		}
		o := offer{prefix: p, valid: valid, until: at.Add(valid)}
		if was, ok := a.offers[link]; ok && was.prefix == p && at.Before(was.until) && !o.until.Before(was.until.Add(-countDownSlack)) && 2*valid >= was.valid {
			o.valid = max(o.valid, was.valid)
		}
		a.offers[link] = o
	}
}

// liveOffers counts the offers not lapsed by now: the digest slots
// Snapshot leaves them (observe.State.Reserve).
func (a *Agent) liveOffers(now time.Time) int {
	n := 0
	for _, o := range a.offers {
		if now.Before(o.until) {
			n++
		}
	}
	return n
}

// markOffers adds to node, with source offer, the delegations offered on its
// links and not yet lapsed, and returns when the earliest lapses (zero:
// none). An offer is never a delegation held: the writer counts it only as
// the confirmer's word. Snapshot left each a slot (Reserve), so a link
// crowded with RA prefixes does not push it out; only a link the digest
// does not carry leaves it out.
func (a *Agent) markOffers(node *digest.Node, now time.Time) time.Time {
	var next time.Time
	total := 0
	for _, l := range node.Links {
		total += len(l.Prefixes)
	}
	for link, o := range a.offers {
		if !now.Before(o.until) {
			delete(a.offers, link)
			continue
		}
		i := slices.IndexFunc(node.Links, func(l digest.Link) bool { return l.Name == link })
		if i < 0 || total >= digest.MaxPrefixes {
			continue
		}
		// With the valid lifetime the server stated (relative: the
		// digest does not change while the server's answer does not),
		// which bounds the delegation's drain once it is replaced.
		valid := min(o.valid, digest.MaxLifetime*time.Second)
		node.Links[i].Prefixes = append(node.Links[i].Prefixes, digest.Prefix{Prefix: o.prefix, Valid: valid, Sources: digest.SourceOffer})
		total++
		if next.IsZero() || o.until.Before(next) {
			next = o.until
		}
	}
	if next.IsZero() {
		return next
	}
	*node = node.Canonical()
	return next
}
