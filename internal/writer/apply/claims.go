package apply

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// ask is what one object following a DynamicPrefix - a Service, or a pool
// of a kind that claims addresses (backends.Kind.Claims) - asks for, as the
// claims weigh it.
type ask struct {
	who                   string // "namespace/name" of a Service, "Kind namespace/name" of a pool
	created               metav1.Time
	namespace, name, kind string
	ips                   []string               // canonical
	place                 holdings.ServiceFollow // its suffix, subnet or range: where ips lie under any prefix
	seen                  render.Seen            // what its status and record say it holds
	hold                  render.Hold
	// absent: it follows, but asked for nothing this pass (its annotations
	// did not render): it holds by the writer only what the writer gave it
	// last and its placement then, renumbered; what its load balancer
	// publishes for it (ips) at that status's rank, and what it published
	// before the current prefix renumbered (render.Renumbered: where its
	// placement lies now, though the writer's memory of it is gone), address
	// by address (offer), and for this pass alone (remembered). Nothing is
	// written for it.
	absent bool
	// held: it asked for Address, which a load balancer publishes now for
	// Holder (possessed); it asks as an absent one this pass.
	held render.Conflict
	// barred: it asked for Address, which a load balancer publishes now
	// for Holder, and has nothing published for it to keep (possessed):
	// its claim is lost.
	barred render.Conflict
	// withheld: addresses on a draining prefix it asked for, which a load
	// balancer publishes now for another (possessed): left out of ips and
	// of what is written for it.
	withheld []render.Conflict
	svc      *serviceAsk
	pool     *backends.Pool
}

// byAge orders asks as their claims are honoured: the oldest first, then by
// namespace, name and kind (one creation second holds several, and a
// Gateway may share its Service's name).
func byAge(a, b ask) int {
	if c := a.created.Compare(b.created.Time); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name), cmp.Compare(a.kind, b.kind))
}

// offer puts asks in the order their claims are honoured: the strongest
// hold first (render.HoldOf, given what the writer gave in its last pass,
// followed through m's placements onto the prefixes pooled now, and what
// each one's load balancer published on a prefix named (a decision's
// Managed) before the current one, renumbered: render.Renumbered), then the
// oldest (byAge). An absent ask is offered address by address - what it was
// given last, its remembered placement renumbered (Given.Following), what
// its load balancer publishes for it, and what it published before the
// current prefix, renumbered - each at its own hold: a hold is of the whole
// ask, so one address given it would otherwise lend the writer's rank to
// every address its owner's lbipam.cilium.io/ips added beside it (red team
// r5). What another's load balancer publishes now is never an ask's by
// what its own published before, renumbered, and one asking for it that no
// memory of the writer's gives it is held, barred or - on a draining
// prefix - withheld (possessed).
func offer(asks []ask, given render.Given, m model.Model, pooled, named []netip.Prefix) []ask {
	earlier := render.Earlier(m, pooled, named)
	publisher := publishers(asks)
	for i := range asks {
		// Red team r7a: what another's load balancer publishes now is
		// never this one's by what its own published before, renumbered:
		// an address on a prefix still draining may have been granted
		// after the current one was pooled (a tenant's own
		// lbipam.cilium.io/ips, taking a free one), and the writer would
		// take the other's current address away.
		asks[i].seen.Earlier = slices.DeleteFunc(render.Renumbered(m, asks[i].seen.Published, earlier, pooled),
			func(a string) bool { return publisher[a] != "" && publisher[a] != asks[i].who })
		if !asks[i].absent && slices.ContainsFunc(render.Under(m, asks[i].ips, earlier), func(a string) bool { return !slices.Contains(asks[i].seen.Published, a) }) {
			// It asks for an address handed out before that its load
			// balancer does not publish for it: another's, or nobody's.
			// What it published before, renumbered, would lend that
			// address its rank - a hold is of the whole ask (as an ask
			// naming one the writer gave another holds nothing by the
			// writer).
			asks[i].seen.Earlier = nil
		}
	}
	asks = possessed(asks, given, m, pooled, publisher)
	var each []ask // an absent ask's second and later addresses, one ask each
	for i := range asks {
		if !asks[i].absent {
			continue
		}
		for a, who := range given.To {
			if who == asks[i].who && !slices.Contains(asks[i].ips, a) {
				asks[i].ips = append(asks[i].ips, a)
			}
		}
		// Red team r6a: one absent since its term began has no placement
		// remembered; what its load balancer published before the current
		// prefix, renumbered, is where its placement lies now.
		for _, a := range slices.Concat(given.Following(m, asks[i].who, pooled), asks[i].seen.Earlier) {
			if !slices.Contains(asks[i].ips, a) {
				asks[i].ips = append(asks[i].ips, a)
			}
		}
		slices.Sort(asks[i].ips)
		for _, a := range asks[i].ips[min(1, len(asks[i].ips)):] {
			one := asks[i]
			one.ips, one.held = []string{a}, render.Conflict{}
			each = append(each, one)
		}
		asks[i].ips = asks[i].ips[:min(1, len(asks[i].ips))]
	}
	asks = append(asks, each...)
	for i := range asks {
		asks[i].hold = render.HoldOf(asks[i].who, asks[i].ips, asks[i].seen, given.To, given.Following(m, asks[i].who, pooled))
	}
	slices.SortFunc(asks, byAge)
	slices.SortStableFunc(asks, func(a, b ask) int { return cmp.Compare(b.hold, a.hold) })
	return asks
}

// remembered is given (a whole pass's claims, honoured in asks' order;
// last: the pass before) as the writer remembers it for its next pass
// (Writer.gave): an address an absent ask kept only by its load balancer's
// status - neither given it last nor on its remembered placement renumbered
// - is its for this pass, not given. Remembered, it would be the writer's at
// the next pass: a tenant absent on purpose whose own lbipam.cilium.io/ips
// published web's next address would hold it by the writer at the
// renumbering (red team r5). The tenant fuzzer's model of the writer's last
// pass uses it too.
func remembered(given, last render.Given, asks []ask, m model.Model, pooled []netip.Prefix) render.Given {
	for _, x := range asks {
		if !x.absent {
			continue
		}
		following := last.Following(m, x.who, pooled)
		for _, a := range x.ips {
			if given.To[a] == x.who && last.To[a] != x.who && !slices.Contains(following, a) {
				delete(given.To, a)
			}
		}
	}
	return given
}

// claim weighs x's claim in given (the pass so far; last: the pass before).
// An absent object keeps, one by one, the addresses it holds that nobody
// stronger took, and the placement it was remembered with: an honest
// Service out of one pass (its subnet renamed before its annotation
// follows) loses nothing to whoever asks for its address meanwhile.
func (x ask) claim(given, last render.Given, m model.Model, pooled []netip.Prefix) (render.Conflict, bool) {
	if x.barred.Address != "" {
		return x.barred, false
	}
	if !x.absent {
		return given.Won(m, pooled, x.who, x.ips, x.place)
	}
	kept := false
	for _, a := range x.ips {
		_, ok := given.To.Claim(x.who, []string{a})
		kept = kept || ok
	}
	if f, ok := last.Placed[x.who]; ok && kept {
		given.Placed[x.who] = f
	}
	return render.Conflict{}, true
}

// absentAsk is what x - a Service, or a pool of a claiming kind, following
// this DynamicPrefix that asked for nothing this pass - holds: the
// addresses its status shows, each at that status's rank (a Service's load
// balancer publishes them; a Gateway's echoes its owner's spec.addresses),
// not its record or a placement (it asked for none); offer adds those the
// writer gave it in its last pass, and its placement renumbered. Nothing
// is written for it.
func absentAsk(x ask) ask {
	seen := render.Seen{Published: x.seen.Published, Echoed: x.seen.Echoed}
	return ask{who: x.who, created: x.created, namespace: x.namespace, name: x.name, kind: x.kind,
		ips: slices.Concat(seen.Published, seen.Echoed), seen: seen, absent: true}
}

// serviceAskOf is who m is, and what its load balancer publishes for it,
// as the claims weigh it.
func serviceAskOf(m *holdings.CachedService) ask {
	return ask{who: api.Key(m.Namespace, m.Name), created: m.CreationTimestamp, namespace: m.Namespace, name: m.Name,
		seen: render.Seen{Published: canonical(m.Ingress)}}
}

// poolAskOf is who p is, and what its status says it holds (echoedSeen),
// as the claims weigh it; generated is what a load balancer publishes for
// the Service its controller generated for it (backends.GeneratedPublished).
func poolAskOf(p *backends.Pool, generated []string) ask {
	return ask{who: p.Kind.Name + " " + p.Key(), created: p.Live.GetCreationTimestamp(),
		namespace: p.Namespace, name: p.Name, kind: p.Kind.Name,
		seen: echoedSeen(canonical(p.Kind.PublishedOf(p.Live)), generated)}
}

// echoedSeen is what a Gateway's status says it holds: it echoes
// (echoed) its spec.addresses, which its owner chooses, so an echo
// outweighs only a record (HeldByEcho). But what it echoes that a load
// balancer publishes for the Service its controller generated for it
// (generated) is published for it, as a Service's ingress is (red team
// r9b): the Gateway is held by it (possessed), and another's earlier
// address renumbered never takes it (offer). A tenant gains nothing by it:
// the load balancer granted that address to a Service in the Gateway's own
// namespace, as it would grant it to a Service of the tenant's own
// following with the same entry - a free address, never one it publishes
// for another - and an echo alone, which the owner's spec steers, is still
// an echo.
func echoedSeen(echoed, generated []string) render.Seen {
	var out render.Seen
	for _, a := range echoed {
		if slices.Contains(generated, a) {
			out.Published = append(out.Published, a)
		} else {
			out.Echoed = append(out.Echoed, a)
		}
	}
	return out
}

// claimantAsks is what each pool of a claiming kind following model's
// DynamicPrefix asks for: its addresses on the pooled prefixes. One in a
// namespace the DynamicPrefix does not let follow (spec.serviceNamespaces,
// as for Services) asks for nothing: it is reported, and released if it
// holds ours. One that cannot be read, or whose reference the spec cannot
// resolve (its subnet renamed before its owner follows), is reported and
// asks as an absent Service does (absentAsk): out of one pass, it keeps
// what the writer gave it, and nobody younger is given its address.
func (w *Writer) claimantAsks(ctx context.Context, services cache.Indexer, pools []backends.Cached, spec model.Model, d decide.Decision) (permit.Outcomes, []ask) {
	var out permit.Outcomes
	var asks []ask
	for _, c := range pools {
		if !c.Kind.Claims {
			continue
		}
		for _, p := range c.Following(spec.Name) {
			self := permit.Object{Resource: p.Kind.Resource, Namespace: p.Namespace, Name: p.Name}
			generated := backends.GeneratedPublished(services, p)
			if p.Err != nil {
				out = append(out, w.unreadable(p))
				asks = append(asks, absentAsk(poolAskOf(p, generated)))
				continue
			}
			if !spec.LetsFollow(p.Namespace) {
				w.Events.Announce("pool/"+self.String()+"/namespace", p.Live, true, "NamespaceNotAllowed",
					fmt.Sprintf("DynamicPrefix %s does not let %ss in namespace %s follow it (spec.serviceNamespaces): it gets no address", spec.Name, p.Kind.Name, p.Namespace))
				out = append(out, w.releasePool(ctx, p, spec.Name, fmt.Sprintf("namespace %s may not follow DynamicPrefix %s", p.Namespace, spec.Name)))
				continue
			}
			w.Events.Forget("pool/" + self.String() + "/namespace")
			pl, err := w.plan(p.Kind, p.Object, spec, d)
			if err != nil {
				out = append(out, w.pool(ctx, p, spec, d)) // reports it
				asks = append(asks, absentAsk(poolAskOf(p, generated)))
				continue
			}
			x := poolAskOf(p, generated)
			x.ips, x.pool = canonical(pl.write.Record), p
			x.place = holdings.ServiceFollow{Suffix: pl.po.Follow.Suffix, Range: pl.po.Follow.AddressRange, Subnet: pl.po.Follow.Subnet}
			x.seen.Recorded = canonical(pl.po.Record.Entries)
			asks = append(asks, x)
		}
	}
	return out, asks
}

// claimantPool writes a pool of a claiming kind whose claim was won (ok), or
// releases it with an event saying who holds the address c it asked for.
func (w *Writer) claimantPool(ctx context.Context, p *backends.Pool, spec model.Model, d decide.Decision, c render.Conflict, ok bool) permit.Outcome {
	self := permit.Object{Resource: p.Kind.Resource, Namespace: p.Namespace, Name: p.Name}
	if ok {
		w.Events.Forget("pool/" + self.String() + "/conflict")
		return w.pool(ctx, p, spec, d)
	}
	w.Events.Announce("pool/"+self.String()+"/conflict", p.Live, true, render.ServiceAddressConflict,
		fmt.Sprintf("%s is asked for by %s too, which holds it or asked first: this %s gets none of renumber's addresses until its dynamic-prefix.io/suffix is its own", c.Address, c.Holder, p.Kind.Name))
	return w.releasePool(ctx, p, spec.Name, fmt.Sprintf("its address %s is %s's", c.Address, c.Holder))
}

// announceHeldPool is announceHeld for a pool of a claiming kind (a
// Gateway), under the subject claimantPool forgets once its claim is won.
func (w *Writer) announceHeldPool(x ask) {
	if x.pool == nil {
		return
	}
	p := x.pool
	self := permit.Object{Resource: p.Kind.Resource, Namespace: p.Namespace, Name: p.Name}
	w.Events.Announce("pool/"+self.String()+"/conflict", p.Live, true, render.ServiceAddressConflict,
		fmt.Sprintf("%s is asked for by this %s, but a load balancer publishes it for %s, and no memory of the writer's says whose it is: nothing of this %s is written until one of them lets it go",
			x.held.Address, p.Kind.Name, x.held.Holder, p.Kind.Name))
}

// canonical is every entry of v in canonical form.
func canonical(v []string) []string {
	out := make([]string, len(v))
	for i, e := range v {
		out[i] = holdings.Canonical(e)
	}
	return out
}

// lastGiven is who the writer gave each of dp's addresses in its last pass
// of this leader term, and where it placed them (none after Forget).
func (w *Writer) lastGiven(dp string) render.Given {
	w.givenMu.Lock()
	defer w.givenMu.Unlock()
	return w.given[dp]
}

// gave remembers what a pass over dp ended with.
func (w *Writer) gave(dp string, given render.Given) {
	w.givenMu.Lock()
	defer w.givenMu.Unlock()
	if w.given == nil {
		w.given = map[string]render.Given{}
	}
	w.given[dp] = given
}
