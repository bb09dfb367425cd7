package apply

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// publishers is who each address is published for now, by its load
// balancer (seen.Published; an address published for two is the first's).
func publishers(asks []ask) map[string]string {
	out := map[string]string{}
	for _, x := range asks {
		for _, a := range x.seen.Published {
			if out[a] == "" {
				out[a] = x.who
			}
		}
	}
	return out
}

// possessed is asks with each present one that asks for an address a load
// balancer publishes now for another, which the writer's memory does not
// give it (Given.To, or its placement renumbered: Given.Following), kept
// from it. Possession at the load balancer: the claims never move an
// address a load balancer gave. At a new term (no memory) two objects may
// each be published one of the addresses both ask for - a tenant's own
// lbipam.cilium.io/ips granted web's next address before the writer asked
// for it (red team r6a), or web's address on the draining prefix, free,
// after web was created (red team r7a) - and nothing tells which is the
// copy; weighed whole, one took the other's current address, and the
// other, released, lost it at its load balancer.
//
// Address by address (red team r8 F3): a Service's address on a draining
// prefix published for another is withheld - left out of its ask and of
// what is written for it, reported (AddressPublishedForAnother) - and the
// rest of its ask is weighed as any other's: a Service created during a
// drain whose draining address a tenant's own lbipam.cilium.io/ips took
// while it was free (or the writer gave the other, on a placement it has
// left since) keeps its address on the current prefix. But not
// where the other asks for one of the rest too: each is published one of
// what both ask for, the mirror above, and the whole ask is weighed (a
// Gateway's too: its pool is written whole).
//
// Weighed whole, the first such address decides. One whose load balancer
// publishes for it an address on a prefix pooled now - on the prefix, or
// on a subnet or in a range of its delegation (render.Space: an object
// placed there is published there, not on the /64; red team r8) - is held:
// it asks as an absent one does (absentAsk: it keeps, address by address,
// what is published for it; nothing is written for it). Another is barred:
// its claim is lost to the other (released: nothing on a prefix pooled now
// is published for it to lose), as is one asking for what the writer gave
// the other in this term (a copy: the other is served; Ready does not
// change). Either way the conflict is reported; one the writer gave the
// address keeps asking for it (its DNS target is not it:
// PublishedElsewhere).
func possessed(asks []ask, given render.Given, m model.Model, pooled []netip.Prefix, publisher map[string]string) []ask {
	space, current := render.Space(m, pooled), render.Space(m, pooled[:min(1, len(pooled))])
	asked := map[string][]string{}
	for _, x := range asks {
		asked[x.who] = x.ips
	}
	byWriter := func(who, a string) bool {
		return given.To[a] == who || given.To[a] == "" && slices.Contains(given.Following(m, who, pooled), a)
	}
	for i, x := range asks {
		if x.absent {
			continue
		}
		var contested []render.Conflict
		for _, a := range x.ips {
			if y := publisher[a]; y != "" && y != x.who && !byWriter(x.who, a) {
				contested = append(contested, render.Conflict{Address: a, Holder: y, Loser: x.who, Published: true})
			}
		}
		if len(contested) == 0 {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(x.ips), func(a string) bool {
			return slices.ContainsFunc(contested, func(c render.Conflict) bool { return c.Address == a })
		})
		if x.kind == "" && !slices.ContainsFunc(contested, func(c render.Conflict) bool {
			return onAny(c.Address, current) || slices.ContainsFunc(rest, func(a string) bool { return slices.Contains(asked[c.Holder], a) })
		}) {
			asks[i].ips, asks[i].withheld = rest, contested
			continue
		}
		c := contested[0]
		if byWriter(c.Holder, c.Address) || !slices.ContainsFunc(x.seen.Published, func(b string) bool { return onAny(b, space) }) {
			c.Published = false
			asks[i].barred = c
			continue
		}
		held := absentAsk(x)
		held.seen.Earlier, held.svc, held.pool, held.held = x.seen.Earlier, x.svc, x.pool, c
		asks[i] = held
	}
	return asks
}

// onAny says whether a (canonical) lies on a prefix of pooled.
func onAny(a string, pooled []netip.Prefix) bool {
	ip, err := netip.ParseAddr(a)
	return err == nil && slices.ContainsFunc(pooled, func(p netip.Prefix) bool { return p.Contains(ip) })
}

// announceHeld reports, on the Service x, that it is held (possessed): it
// asks for an address a load balancer publishes for another, and nothing is
// written for it while that lasts. A Gateway is held too where a load
// balancer publishes for it (echoedSeen): announceHeldPool.
func (w *Writer) announceHeld(x ask) {
	if x.svc == nil {
		w.announceHeldPool(x)
		return
	}
	w.Events.Announce("svc/"+x.svc.self.String()+"/conflict", serviceRef(x.svc.m), true, render.ServiceAddressConflict,
		fmt.Sprintf("%s is asked for by this Service, but a load balancer publishes it for %s, and no memory of the writer's says whose it is: nothing of this Service is written until one of them lets it go",
			x.held.Address, x.held.Holder))
}

// announceWithheld reports, on the Service x, the addresses withheld from
// it (possessed: on a draining prefix, published for another) - once while
// they stay the same - and returns them for the DynamicPrefix's condition.
func (w *Writer) announceWithheld(x ask) []render.Conflict {
	if x.svc != nil {
		w.announceConflicts("svc/"+x.svc.self.String()+"/withheld", x.svc.m, x.withheld,
			"a load balancer publishes this Service's address on a draining prefix for another object (%s), and no memory of the writer's gives it this Service: renumber leaves it out of this Service's addresses until that ends, and writes the others")
	}
	return x.withheld
}
