package apply

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// FuzzATenantTakesNoAddressItWasNotGiven plays one tenant against the
// claims (offer, then render.Claims in that order, as Writer.Services
// weighs them). The DynamicPrefix advertises a /64 of a /56 delegation (at
// an offset the fuzzer picks: 0, 1 or 0xff, where subnet "one" or "lb"
// lies; a renumbering may move it to another offset of the next
// delegation) and carves from the delegation subnets "one" and "lb" and an
// address range "r" inside "lb": an address is a suffix on the /64, on a
// subnet, or in the range (render.ServiceAddress), and placements of
// different kinds collide. Two honest Services, each with a suffix of its
// own and any placement, were given their addresses in the writer's last
// pass; the prefix may then be renumbered (a new one in front, the old one
// draining, or gone at once). The fuzzer plays up to three tenant objects:
// each picks any placement and suffix (an honest one's too), the placement
// it had in the writer's last pass (it was given its address there where
// nobody held it), any creation time (older than everyone), any record
// naming any address, and any status the load balancer could publish for
// it - any address not published for another object (a tenant's own
// lbipam.cilium.io/ips may win it a new address before the writer asks for
// it) - or, as a Gateway, any status.addresses at all (its controller echoes
// the spec the tenant writes). In the writer's last pass a tenant may also
// have asked for nothing under its placement: the address it puts on the
// old prefix already one of its own entries (in its lbipam.cilium.io/ips or
// a Gateway's spec.addresses, outside its record: the user's), or its DNS
// target mapped (dynamic-prefix.io/mapping); an empty claim is won, and the
// writer remembers what Writer.Services remembers of a winner. The admin
// may rename a subnet or the range between the two passes. Property: no
// tenant takes an address published for another, nor one it was not given;
// an honest holder loses no address its load balancer publishes for it.
// Every honest Service wins its whole claim - but an address a load
// balancer publishes for the other, which no memory of the writer's gives
// it (possession: nothing moves, the conflict is reported) - and one absent
// from this pass has nothing of its placement given to another. In a new
// leader term (no memory of what was given; the old prefix draining, or
// gone at once) the
// honest Services hold by what their load balancer published under the
// old prefix (their first address at least), renumbered onto the prefixes
// pooled now (render.Renumbered, HeldByEarlierStatus): that outranks any
// status on the current prefix but that of the very address, so a tenant
// may be granted an honest one's address on the new prefix (race: its own
// lbipam.cilium.io/ips, before the writer asked) and keep it, but never its
// address under the old prefix, which the load balancer gave the honest
// one; and where a tenant was granted the honest one's address on the
// draining prefix (newborn: the honest one created since), its current
// address stays the honest one's. The writer's last pass may have been the
// first of its term (termBefore), reading the honest ones' statuses alike.
func FuzzATenantTakesNoAddressItWasNotGiven(f *testing.F) {
	// A seed is: the /64's offset (before, and after a renumbering:
	// offset%3, offset/3%3), the renumbering, a new term, web's and
	// api's placements, what their load balancers publish, how many
	// tenants, and for each its age, placement, suffix, whether it moved
	// since the last pass (and from where), whether it is a Gateway, and
	// its record and status (a bit per address of the universe: 36 where
	// the /64 is at offset 0, five bytes each).
	none, all := make([]byte, 5), bytes.Repeat([]byte{0xff}, 5)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0})
	// Renumbered, a tenant copies web's suffix, forges everything, is older.
	f.Add(slices.Concat([]byte{0, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0}, all, all))
	// A new term, tenants published on their own.
	f.Add(slices.Concat([]byte{0, 0, 1, 0, 1, 1, 1, 3, 0, 2, 2, 0, 0}, none, all, []byte{1, 0, 3, 0, 0}, all, none))
	// Red team r4a: no drain, an older tenant copying web's placement asked
	// for nothing in the last pass (web's address its own entry): it won
	// that empty claim, and the placement it won with is web's.
	f.Add(slices.Concat([]byte{0, 2, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0}, none, none, []byte{1}))
	// Red team r4a: the renumbering moves the /64 inside the delegation
	// (offset 1, then 0xff: onto subnet "lb"), the old prefix draining; web
	// on "lb" with ::1, an older tenant on the /64 with ::1 (its own
	// address, given). Its placement now puts it on web's next address:
	// both hold it by the writer, age gives it to the tenant, and web loses
	// its whole claim - its draining address too.
	f.Add(slices.Concat([]byte{1 + 3*2, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0}, none, none, []byte{0}))
	// Web absent from the last pass (its annotations did not render), a
	// younger tenant asking for web's address there; web back now.
	f.Add(slices.Concat([]byte{0, 0, 0, 0, 1, 1, 0, 1, 2, 0, 0, 0, 0}, none, none, []byte{0, 1}))
	// Web absent from this pass, a younger tenant asking for its address.
	f.Add(slices.Concat([]byte{0, 0, 0, 0, 1, 1, 0, 1, 2, 0, 0, 0, 0}, none, none, []byte{0, 4}))
	// Renumbered with no drain, a tenant records web's next address (bit 1).
	f.Add(slices.Concat([]byte{0, 2, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0}, []byte{2, 0, 0, 0, 0}, none))
	// A new term, an older tenant Gateway echoes web's address (bit 0).
	f.Add(slices.Concat([]byte{0, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1}, none, []byte{1, 0, 0, 0, 0}))
	// No drain, an older tenant copies api's subnet and suffix, forges everything.
	f.Add(slices.Concat([]byte{0, 2, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0, 0}, all, all))
	// No drain, api in the range, an older tenant copies its placement.
	f.Add(slices.Concat([]byte{0, 2, 0, 0, 3, 0, 0, 1, 0, 3, 1, 0, 0}, none, none))
	// Red team r5: renumbered (the old prefix draining), an older tenant
	// given ::3 makes itself absent; its own lbipam.cilium.io/ips won it
	// web's next address (bit 1) beside its own (bit 6) before the writer
	// asked for it. Its hold is of the ask: by the writer (its ::3), so
	// it claims web's next address before web - and web loses its whole
	// claim, its draining address too.
	f.Add(slices.Concat([]byte{0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 2, 0, 0}, none, []byte{0x42, 0, 0, 0, 0}, []byte{0, 0, 1}))
	// Red team r5: the /64 moves (offset 1, then 0xff: onto subnet "lb"),
	// the old prefix draining; web on subnet "one" with ::1 (on A, the
	// /64 itself). An older tenant given ::1 on "lb" moves its placement to
	// ::1 on the /64 as the /64 moves: on B that is where it was given
	// (lb ::1), so it holds its whole ask by the writer - and on A it is
	// web's address. Web loses its draining address and, all or nothing,
	// its new one, which nobody else asks for: not the stated limit (the
	// holder's placement landing, renumbered, on web's address).
	f.Add(slices.Concat([]byte{1 + 3*2, 1, 0, 2, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0}, none, none, []byte{0, 0, 0}))
	// No drain, an older tenant given ::1 on subnet "one" moves onto web's
	// placement: the same host bits under the /64, not the same placement.
	f.Add(slices.Concat([]byte{0, 2, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 2, 0, 0}, none, none))

	// Red team r6a: the admin renames subnet "lb" (rename 1) while web, on
	// it, has not followed (absent from this pass, bit 2 of absent), and the
	// prefix is renumbered with no drain: web's remembered placement names
	// "lb", which no longer resolves (Given.Following), so a younger tenant
	// following the rename with web's suffix is given web's next address.
	f.Add(slices.Concat([]byte{0, 2, 0, 1, 0, 1, 1, 1, 2, 1, 0, 0, 0}, none, none, []byte{0, 4, 0, 1}))

	// Red team r6a: the same rename with web following it in this pass (not
	// absent) and an older tenant doing the same with web's suffix: web's
	// placement, remembered by the name "lb", follows nowhere; neither holds
	// web's next address, and age gives it to the tenant.
	f.Add(slices.Concat([]byte{0, 2, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0}, none, none, []byte{0, 0, 0, 1}))

	// Red team r6a: a new term during the drain; the older tenant absent on
	// purpose (its own address ::3 on A) was granted web's next address by
	// its load balancer (its own lbipam.cilium.io/ips, waiting when the
	// pool got B: race). Both hold by status, age decides, and web loses
	// its whole claim - its draining address too.
	f.Add(slices.Concat([]byte{0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 2, 0, 0}, none, []byte{0x42, 0, 0, 0, 0}, []byte{0, 0, 1, 0, 1}))
	// Red team r6a: the same with the tenant present, copying web's suffix,
	// web's next address a user entry of its own lbipam.cilium.io/ips.
	f.Add(slices.Concat([]byte{0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0}, none, []byte{0x02, 0, 0, 0, 0}, []byte{0, 0, 0, 0, 1}))

	// Red team r6a: web absent from the first pass of a new term (it keeps
	// its published address, not remembered: no placement either) and from
	// this one, renumbered with no drain: a younger tenant copying web's
	// suffix is given web's next address.
	f.Add(slices.Concat([]byte{0, 2, 0, 0, 0, 1, 1, 1, 2, 0, 0, 0, 0}, none, none, []byte{0, 5, 0, 0, 0, 1}))

	// A new term meeting a renumbering with no drain (before, not
	// covered: nothing the new leader read named the new addresses): web's
	// load balancer still publishes its old address, an older tenant
	// copying web's suffix was granted web's next address (race). Web's
	// old address renumbered (render.Renumbered) held it before any status
	// on the current prefix (HeldByEarlierStatus) - but the tenant's load
	// balancer publishes it: possession, nothing moves, web does not get
	// it, and the conflict is reported (red team r7a's mirror).
	f.Add(slices.Concat([]byte{0, 2, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0}, none, []byte{0x02, 0, 0, 0, 0}, []byte{0, 0, 0, 0, 1}))

	// Red team r7a: a new term during the drain; web created since the
	// renumbering (newborn), its load balancer publishing only its current
	// address; a younger tenant copying web's suffix was granted web's
	// address on the draining prefix by its own lbipam.cilium.io/ips. That
	// address, renumbered, ranks HeldByEarlierStatus above web's status.
	f.Add(slices.Concat([]byte{0, 1, 1, 0, 0, 1, 1, 1, 2, 0, 0, 0, 0}, none, none, []byte{0, 0, 0, 0, 0, 0, 1}))

	// Red team r8 (F3): during the drain web is fresh, created since the
	// writer's last pass; an older tenant's own lbipam.cilium.io/ips took
	// web's address on the draining prefix while it was free. Possession
	// barred web whole (nothing published for it on the pooled space):
	// no address on the current prefix either, for the whole drain.
	f.Add(slices.Concat([]byte{0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 2, 0, 0}, none, none, []byte{0, 0, 0, 0, 0, 0, 0, 0, 1}))
	// The same on subnet "lb" (F3b).
	f.Add(slices.Concat([]byte{0, 1, 0, 1, 0, 1, 1, 1, 0, 0, 2, 0, 0}, none, none, []byte{0, 0, 0, 0, 0, 0, 0, 0, 1}))
	// At a new term, web's current address published for it (an earlier
	// leader wrote it): possession held web whole - nothing written.
	f.Add(slices.Concat([]byte{0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 2, 0, 0}, none, none, []byte{0, 0, 0, 0, 0, 0, 0, 0, 3}))

	m := model.Model{Name: "dp", Delegated: 56,
		Subnets: []model.Subnet{{Name: "lb", Offset: 0xff, Length: 64}, {Name: "one", Offset: 1, Length: 64}},
		Ranges:  []model.Range{{Name: "r", Start: netip.MustParseAddr("::ff:0:0:0:0"), End: netip.MustParseAddr("::ff:0:0:0:ffff")}}}
	placements := []holdings.ServiceFollow{{}, {Subnet: "lb"}, {Subnet: "one"}, {Range: "r"}}
	const prefixes, suffixes = 3, 4
	placed := func(place, suffix int) holdings.ServiceFollow {
		fl := placements[place%len(placements)]
		fl.Suffix = fmt.Sprintf("::%x", suffix%suffixes+1)
		if fl.Range != "" {
			fl.Suffix = fmt.Sprintf("::ff:0:0:0:%x", suffix%suffixes+1)
		}
		return fl
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		next := func() int {
			if len(in) == 0 {
				return 0
			}
			b := in[0]
			in = in[1:]
			return int(b)
		}
		var prefix [prefixes]netip.Prefix
		o := next()
		offsets := []int{0, 1, 0xff}
		offset, moved := offsets[o%3], offsets[o/3%3] // the advertised /64 in the delegation, before and after
		for p := range prefixes {
			at := offset
			if p > 0 {
				at = moved
			}
			prefix[p] = netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x:%x::/64", p+1, at))
		}
		pooledBefore := []netip.Prefix{prefix[0]}
		pooled := pooledBefore
		switch next() % 3 {
		case 1:
			pooled = []netip.Prefix{prefix[1], prefix[0]} // renumbered: 1 current, 0 draining
		case 2:
			pooled = []netip.Prefix{prefix[1]} // renumbered with no drain: 0 gone at once
		}
		// A new leader term may meet a renumbering with no drain too: what
		// the load balancers publish names only the old addresses, and the
		// new leader renumbers them (render.Renumbered).
		newTerm := next()%2 == 1
		addrs := func(fl holdings.ServiceFollow, on []netip.Prefix) []string {
			var out []string
			for _, p := range on {
				a, err := render.ServiceAddress(m, fl, p)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, a.String())
			}
			return out
		}
		// Every address a tenant can name: any placement, suffix and prefix.
		var universe []string
		for pl := range placements {
			for s := range suffixes {
				for _, a := range addrs(placed(pl, s), prefix[:]) {
					if !slices.Contains(universe, a) {
						universe = append(universe, a)
					}
				}
			}
		}
		mask := func() (bits uint64) {
			for i := 0; i < len(universe); i += 8 {
				bits |= uint64(next()) << i
			}
			return bits
		}
		// The writer's last pass gave the honest Services their addresses
		// (suffixes 1 and 2: no two placements put them on one address).
		type honestService struct {
			who string
			fl  holdings.ServiceFollow
		}
		honest := []honestService{{"default/web", placed(next(), 0)}, {"default/api", placed(next(), 1)}}
		isHonest := map[string]bool{}
		for _, h := range honest {
			isHonest[h.who] = true
		}
		publishedFor := map[string]string{} // address -> the one object it is published for
		// Red team r6a: at a new term, a tenant's address on the new prefix
		// that an honest Service asks for, granted by its load balancer to
		// the tenant's own lbipam.cilium.io/ips, waiting when the pool got
		// the prefix, before the writer asked for it for the honest one
		// (applied where race, read last, is odd).
		type grant struct {
			i int
			a string
		}
		var raced []grant
		var all, lastPass []ask
		tenantGateway := map[string]bool{}
		for _, h := range honest {
			x := ask{who: h.who, namespace: "default", name: h.who[len("default/"):], created: metav1.Unix(1000, 0), ips: addrs(h.fl, pooled), place: h.fl}
			published := next()
			for i, a := range addrs(h.fl, pooledBefore) {
				if published&(1<<i) != 0 || newTerm && i == 0 {
					x.seen.Published = append(x.seen.Published, a)
					publishedFor[a] = h.who
				}
			}
			x.seen.Recorded = addrs(h.fl, pooledBefore)
			all = append(all, x)
		}
		for i := range next() % 4 {
			who := fmt.Sprintf("tenant/t%d", i)
			x := ask{who: who, namespace: "tenant", name: fmt.Sprintf("t%d", i), created: metav1.Unix(int64(next()%3)*900, 0)}
			x.place = placed(next(), next())
			x.ips = addrs(x.place, pooled)
			// Its placement in the writer's last pass (the same, or moved
			// since), and its address there where nobody held it.
			then := x.place
			if next()%2 == 1 {
				then = placed(next(), next())
			}
			lastPass = append(lastPass, ask{who: who, namespace: x.namespace, name: x.name, created: x.created, ips: addrs(then, pooledBefore), place: then})
			// A Gateway: its status echoes its spec.addresses, any
			// address its owner chooses (HeldByEcho) - and, where its
			// controller is Cilium's, a free one the load balancer
			// granted the Service generated for it (as it would a
			// Service of the tenant's own) is published for it
			// (echoedSeen, red team r9b).
			gateway := next()%2 == 1
			tenantGateway[who] = gateway
			var generated []string
			rec, pub := mask(), mask()
			for j, a := range universe {
				if rec&(1<<j) != 0 {
					x.seen.Recorded = append(x.seen.Recorded, a)
				}
				honestAsks := slices.ContainsFunc(all[:len(honest)], func(h ask) bool { return slices.Contains(h.ips, a) })
				switch {
				case pub&(1<<j) == 0:
				case gateway:
					x.seen.Echoed = append(x.seen.Echoed, a)
					if publishedFor[a] == "" && !(newTerm && honestAsks) {
						generated = append(generated, a)
						publishedFor[a] = who
					}
				case publishedFor[a] == "" && !(newTerm && honestAsks):
					x.seen.Published = append(x.seen.Published, a)
					publishedFor[a] = who
				case publishedFor[a] == "" && !slices.ContainsFunc(pooledBefore, func(p netip.Prefix) bool { return p.Contains(netip.MustParseAddr(a)) }):
					raced = append(raced, grant{len(all), a})
				}
			}
			if gateway {
				seen := echoedSeen(x.seen.Echoed, generated)
				x.seen.Published, x.seen.Echoed = seen.Published, seen.Echoed
			}
			all = append(all, x)
		}
		// The writer's last pass, weighed as Writer.Services weighs one
		// (offer, then ask.claim): the pass before it gave the honest
		// Services their addresses; in it they asked for them again - or
		// one was absent from it (bit i of absent: honest i; its
		// annotations did not render), holding only what it was given and
		// what is published for it - and the tenants asked for theirs (an
		// empty ask, bit i of empty: tenant i's, claims nothing, and wins).
		// In this pass an honest Service may be absent too (bit 2+i).
		empty, absent := next(), next()
		// Red team r5: a tenant may make itself absent from this pass on
		// purpose (bit i of gone: tenant i; an annotation that does not
		// render): it then holds what it was given last and what its load
		// balancer publishes for it - which its own lbipam.cilium.io/ips,
		// no longer rewritten by the writer, chose.
		gone := next()
		for i := range all[len(honest):] {
			if gone&(1<<i) != 0 {
				all[len(honest)+i] = absentHonest(all[len(honest)+i])
			}
		}
		// Red team r6a: the admin renames a subnet or the range between the
		// last pass and this one (rename: 1 "lb", 2 "one", 3 "r"; an honest
		// edit, the same geometry under a new name). Every object not
		// absent from this pass follows the rename (one that did not is
		// absent: bit 2+i of absent, bit i of gone).
		mNow, rename := renamed(m, next()%4)
		race := next()%2 == 1
		// Red team r6a: the writer's last pass was the first of its term
		// (termBefore, read last: the pass before it is forgotten), so an
		// honest Service absent from it keeps what is published for it but
		// no placement.
		termBefore := next()%2 == 1
		for i, h := range honest {
			// That first pass read who holds what from the load balancers,
			// as a new term's does: each honest Service's is published
			// (its first address, as at a new term), unless a tenant's
			// own load balancer publishes it - then the writer's memory
			// alone gave it the honest one, and the fuzzer stays within
			// the term.
			a := addrs(h.fl, pooledBefore)[0]
			switch {
			case !termBefore || publishedFor[a] == h.who:
			case publishedFor[a] == "":
				publishedFor[a] = h.who
				all[i].seen.Published = append(all[i].seen.Published, a)
			default:
				termBefore = false
			}
		}
		if race {
			for _, g := range raced {
				if publishedFor[g.a] != "" {
					continue
				}
				publishedFor[g.a] = all[g.i].who
				all[g.i].seen.Published = append(all[g.i].seen.Published, g.a)
				if all[g.i].absent {
					all[g.i].ips = append(all[g.i].ips, g.a)
				}
			}
		}
		// Red team r7a: at a new term during a drain, web may be newer than
		// the renumbering (created, or recreated, while the old prefix
		// drained; newborn, read last): its load balancer publishes only
		// its current address, and the first tenant's own
		// lbipam.cilium.io/ips was granted web's address on the draining
		// prefix, still pooled and free (a load balancer grants a free
		// address to whoever asks).
		if newborn := next()%2 == 1; newborn && newTerm && len(pooled) == 2 && len(all) > len(honest) {
			old, cur := addrs(honest[0].fl, pooledBefore)[0], addrs(honest[0].fl, pooled)[0]
			if publishedFor[old] == honest[0].who && publishedFor[cur] == "" {
				t0 := &all[len(honest)]
				all[0].seen.Published = []string{cur}
				publishedFor[old], publishedFor[cur] = t0.who, honest[0].who
				t0.seen.Published = append(t0.seen.Published, old)
				if t0.absent {
					t0.ips = append(t0.ips, old)
				}
			}
		}
		// Red team r9b: web may be a Gateway (read last): its controller
		// publishes what it serves in status.addresses (Seen.Echoed), the
		// addresses a load balancer would publish for it as a Service, and
		// no tenant's load balancer is granted them. Its controller is
		// Cilium's: what it echoes, the load balancer publishes for the
		// Service it generated for web (echoedSeen). Played at a new term
		// during a drain, with no tenant Gateway (the documented limits of
		// an echo: none at a renumbering met with no drain, and two echoes
		// told apart by age).
		anyTenantGateway := slices.ContainsFunc(all[len(honest):], func(x ask) bool { return tenantGateway[x.who] })
		gatewayWeb := next()%2 == 1 && newTerm && len(pooled) == 2 && !anyTenantGateway
		if gatewayWeb {
			seen := echoedSeen(all[0].seen.Published, all[0].seen.Published)
			all[0].seen.Echoed, all[0].seen.Published = seen.Echoed, seen.Published
			all[0].kind = "Gateway"
		}
		// Red team r8 (F3): during a drain web may be fresh (read last):
		// created since the writer's last pass, so it was never given an
		// address, and its load balancer publishes none on the draining
		// prefix - the first tenant's own lbipam.cilium.io/ips was granted
		// web's address there while it was free - and, as its owner or an
		// earlier leader's write asked, its current address or nothing.
		fresh := next()
		isFresh := map[string]bool{honest[0].who: fresh%2 == 1 && len(pooled) == 2 && !gatewayWeb}
		if isFresh[honest[0].who] {
			old, cur := addrs(honest[0].fl, pooledBefore)[0], addrs(honest[0].fl, pooled)[0]
			all[0].seen.Published = nil
			if publishedFor[old] == honest[0].who {
				delete(publishedFor, old)
				if len(all) > len(honest) {
					t0 := &all[len(honest)]
					publishedFor[old] = t0.who
					t0.seen.Published = append(t0.seen.Published, old)
					if t0.absent {
						t0.ips = append(t0.ips, old)
					}
				}
			}
			if fresh&2 != 0 && publishedFor[cur] == "" || publishedFor[cur] == honest[0].who {
				all[0].seen.Published = []string{cur}
				publishedFor[cur] = honest[0].who
			}
		}
		before := render.NewGiven()
		var last []ask
		for i, h := range honest {
			if isFresh[h.who] {
				continue // not there yet; present now
			}
			before.Won(m, pooledBefore, h.who, addrs(h.fl, pooledBefore), h.fl)
			x := all[i]
			x.ips = addrs(h.fl, pooledBefore)
			if absent&(1<<i) != 0 {
				x = absentHonest(x)
			}
			last = append(last, x)
			if absent&(1<<(2+i)) != 0 {
				all[i] = absentHonest(all[i])
			}
		}
		if termBefore {
			before = render.NewGiven()
		}
		for i, x := range lastPass {
			if empty&(1<<i) != 0 {
				x.ips = nil
			}
			last = append(last, x)
		}
		last = offer(last, before, m, pooledBefore, pooledBefore)
		given := render.NewGiven()
		for _, x := range last {
			x.claim(given, before, m, pooledBefore)
		}
		given = remembered(given, before, last, m, pooledBefore)
		lastGiven := given
		if newTerm {
			given = render.Given{}
		}
		for i := range all {
			if !all[i].absent {
				all[i].place = rename(all[i].place)
			}
		}
		slices.Reverse(all) // the cache lists them in any order
		// What the decision names (Managed): the prefixes pooled, and the
		// one the previous status named current.
		named := pooled
		if !slices.Contains(named, prefix[0]) {
			named = append(slices.Clone(pooled), prefix[0])
		}
		asked := map[string][]string{} // what each asks for, before the claims weigh it
		for _, x := range all {
			asked[x.who] = slices.Clone(x.ips)
		}
		all = offer(all, given, mNow, pooled, named)
		for _, x := range all { // and, absent, what the writer gave it and its placement renumbered
			for _, a := range x.ips {
				if !slices.Contains(asked[x.who], a) {
					asked[x.who] = append(asked[x.who], a)
				}
			}
		}
		// movedOnto says whether c is the limit the /64's move inside the
		// delegation leaves: the /64 lies at another offset than before,
		// and the address lost is where the holder's placement - the one
		// the writer gave it, or its own now, from an address it held
		// under the old prefix (given, or published for it) - lands now:
		// two placements each held, one address.
		movedOnto := func(c render.Conflict) bool {
			if offset == moved || pooled[0] != prefix[1] {
				return false
			}
			i := slices.IndexFunc(all, func(x ask) bool { return x.who == c.Holder })
			if i < 0 {
				return false
			}
			if slices.Contains(given.Following(mNow, c.Holder, pooled), c.Address) {
				// The placement it was given, renumbered across the
				// move, lands on the address contested: it holds it by
				// the writer, absent or not. (Red team r5: only that
				// address, not any address it asks for - a hold is of
				// the ask, so a tenant that moves its placement as the
				// /64 moves, back onto where it was given, would hold
				// by the writer every address its new placement puts on
				// the old prefix too.)
				return true
			}
			if slices.Contains(all[i].seen.Earlier, c.Address) && !mNow.Delegation(prefix[0]).Contains(netip.MustParseAddr(c.Address)) {
				// What its load balancer published for it under the old
				// prefix, renumbered (render.Renumbered: the placement it
				// was handed out for, wherever the /64 lies now), lands
				// on the address contested: two placements each held
				// meet on it, as the /64 moved onto (or off) a subnet.
				return true
			}
			if all[i].absent {
				// An absent holder holds nothing else by a placement:
				// it asked for none this pass.
				return false
			}
			if newTerm && (all[i].hold == render.HeldByStatus || all[i].hold == render.HeldByEarlierStatus) {
				// A new term with no memory: where the move makes the
				// holder's placement meet the loser's under one prefix
				// only, each holds by its load balancer an address of
				// its own, and age decides.
				return true
			}
			was, err := render.ServiceAddress(mNow, all[i].place, prefix[0])
			if err != nil || lastGiven.To[was.String()] != c.Holder && publishedFor[was.String()] != c.Holder {
				return false
			}
			now, err := render.ServiceAddress(mNow, all[i].place, prefix[1])
			return err == nil && now.String() == c.Address
		}
		// onCurrent says whether a lies under the current prefix (its
		// delegation: on it, or on a subnet or in a range of it), not
		// under one draining.
		onCurrent := func(a string) bool { return mNow.Delegation(pooled[0]).Contains(netip.MustParseAddr(a)) }
		// mirror says whether c's holder asks for another address of the
		// loser's too: each published one of what both ask for (red teams
		// r6a, r7a), and nothing tells the copy - the whole ask is weighed.
		mirror := func(c render.Conflict) bool {
			return slices.ContainsFunc(asked[c.Loser], func(a string) bool { return a != c.Address && slices.Contains(asked[c.Holder], a) })
		}
		now := render.NewGiven()
		limited := map[string]bool{} // honest ones whose whole claim the limit took
		for _, x := range all {
			c, ok := x.claim(now, given, mNow, pooled)
			if isHonest[x.who] && x.held.Address != "" && !onCurrent(x.held.Address) && !mirror(x.held) && x.kind != "Gateway" {
				// Red team r8 (F3): held whole - nothing of it written -
				// for an address on a draining prefix. (A Gateway is
				// still weighed whole, its pool written whole: held, it
				// keeps what is published for it, and nothing is written.)
				t.Fatalf("honest %s held over %s on a draining prefix, published for %s: nothing of it is written (pooled %v, new term %v; offered %v)",
					x.who, x.held.Address, x.held.Holder, pooled, newTerm, describe(all))
			}
			if x.absent && isHonest[x.who] {
				// Absent, it keeps every address it holds: on its
				// placement, or published for it. What it published
				// under the old prefix, renumbered (render.Renumbered),
				// is its placement renumbered - except where the /64
				// moved inside the delegation: an address on the old /64
				// that a subnet covered too is renumbered as on the /64,
				// a guess that may be another's (the limit).
				fl := honest[slices.IndexFunc(honest, func(h honestService) bool { return h.who == x.who })].fl
				for _, a := range x.ips {
					if h := now.To[a]; h != x.who {
						if offset != moved && !slices.Contains(addrs(fl, pooled), a) && !slices.Contains(x.seen.Published, a) {
							t.Logf("limit: honest %s, absent, lost %s to %s: what it published under the old /64 renumbered as on the /64, which moved", x.who, a, h)
							continue
						}
						c, ok = render.Conflict{Address: a, Holder: h}, false
					}
				}
			}
			if isHonest[x.who] && !ok && movedOnto(c) {
				// The limit (docs/security.md): the /64 moved inside the
				// delegation at this renumbering, and the holder's own
				// placement lands, renumbered, on this Service's address;
				// both hold it alike (by the writer, or at a new term by
				// their load balancers), and age decides - for the whole
				// claim.
				t.Logf("limit: honest %s lost %s to %s, whose own placement the /64's move put there", x.who, c.Address, c.Holder)
				limited[x.who] = true
				continue
			}
			if isHonest[x.who] && !ok {
				// Red team r9b: released (barred, or its claim lost), an
				// honest one loses every address of renumber's it had -
				// also one its load balancer publishes for it on the space
				// pooled now, which no claim moves (possession).
				space := render.Space(mNow, pooled)
				for _, a := range slices.Concat(x.seen.Published, x.seen.Echoed) {
					// (A fresh one's load balancer may publish what the
					// writer gave the holder before it existed: within
					// the term the writer's memory decides, as below.)
					byMemory := given.To[a] == c.Holder || slices.Contains(given.Following(mNow, c.Holder, pooled), a)
					if publishedFor[a] == x.who && !(isFresh[x.who] && byMemory) && slices.ContainsFunc(space, func(q netip.Prefix) bool { return q.Contains(netip.MustParseAddr(a)) }) {
						t.Fatalf("honest %s released (lost %s to %s, published %v), though its load balancer publishes %s for it (pooled %v, new term %v; offered %v)", x.who, c.Address, c.Holder, c.Published, a, pooled, newTerm, describe(all))
					}
				}
			}
			if isHonest[x.who] && !ok && onCurrent(c.Address) && publishedFor[c.Address] == c.Holder && given.To[c.Address] != x.who && !slices.Contains(given.Following(mNow, x.who, pooled), c.Address) {
				// Possession at the load balancer: the holder's own load
				// balancer publishes the address, and no memory of the
				// writer's gives it this Service - a race at the load
				// balancer that, at a new term, nothing tells from its
				// mirror (red teams r6a, r7a). Nothing moves; the
				// conflict is reported. Only for its current address:
				// another's claim on a draining one costs it that one
				// alone (red team r8 F3).
				t.Logf("possession: honest %s does not get %s, published for %s", x.who, c.Address, c.Holder)
				continue
			}
			if isHonest[x.who] && !ok && x.barred == c && publishedFor[c.Address] == c.Holder && mirror(c) {
				// Barred whole where the holder asks for another of its
				// addresses too (the mirror): a fresh one has nothing
				// published for it to keep.
				t.Logf("mirror: honest %s does not get %s, published for %s, which asks for another of its addresses too", x.who, c.Address, c.Holder)
				continue
			}
			if isFresh[x.who] && !ok && onCurrent(c.Address) {
				// Fresh, it holds nothing yet: one older, or given the
				// address first, keeps it.
				t.Logf("fresh: honest %s does not get %s, %s's first", x.who, c.Address, c.Holder)
				continue
			}
			if isFresh[x.who] && !ok && publishedFor[c.Address] != c.Holder {
				// The limit left (docs/security.md): weighed by the
				// claims, not possession (no load balancer publishes it
				// for the holder - an absent Gateway's echo, say, above
				// a fresh one's record), a hold is of the whole ask, and
				// a fresh one whose draining address another holds more
				// strongly loses its current address with it.
				t.Logf("limit: fresh honest %s lost %s, held by %s by the claims, and its whole claim with it", x.who, c.Address, c.Holder)
				continue
			}
			if isHonest[x.who] && !ok {
				t.Fatalf("honest %s lost %s to %s (pooled %v, new term %v; offered %v)", x.who, c.Address, c.Holder, pooled, newTerm, describe(all))
			}
			if !isHonest[x.who] || x.absent || x.held.Address != "" {
				continue
			}
			// Red team r8 (F3): written, it is given every address of its
			// placement on the prefixes pooled now but one on a draining
			// prefix that a load balancer publishes for another.
			for _, a := range addrs(honest[slices.IndexFunc(honest, func(h honestService) bool { return h.who == x.who })].fl, pooled) {
				if now.To[a] != x.who && (onCurrent(a) || publishedFor[a] == "" || publishedFor[a] == x.who) {
					t.Fatalf("honest %s, written, is not given %s (kept by %q, published for %q; pooled %v, new term %v; offered %v)",
						x.who, a, now.To[a], publishedFor[a], pooled, newTerm, describe(all))
				}
				// Withheld, it is reported, naming who it is published for.
				if reported := (render.Conflict{Address: a, Holder: publishedFor[a], Loser: x.who, Published: true}); now.To[a] != x.who && !slices.Contains(x.withheld, reported) {
					t.Fatalf("honest %s is not given %s, published for %s, and it is not reported so (%+v)", x.who, a, publishedFor[a], x.withheld)
				}
			}
		}
		// Possession at the load balancer (red teams r6a, r7a): no tenant
		// is given an address published now for another object but by the
		// writer's memory (what it gave the tenant in its last pass of
		// this term: there the other's load balancer raced it) - nor, as
		// the writer writes nothing for an absent or held one, what it
		// keeps this pass alone - and an
		// honest Service loses no address its load balancer publishes for
		// it on a prefix pooled now - the claims never move an address a
		// load balancer gave; where two objects each ask for what the
		// other publishes, nothing moves and the conflict is reported.
		for a, o := range now.To {
			p := publishedFor[a]
			if p == "" || p == o || movedOnto(render.Conflict{Address: a, Holder: o}) ||
				!slices.ContainsFunc(pooled, func(q netip.Prefix) bool { return q.Contains(netip.MustParseAddr(a)) }) {
				continue
			}
			written := slices.ContainsFunc(all, func(x ask) bool { return x.who == o && !x.absent })
			if !isHonest[o] && written && given.To[a] != o && !slices.Contains(given.Following(mNow, o, pooled), a) {
				t.Fatalf("tenant %s was given %s, published for %s (pooled %v, new term %v; offered %v)", o, a, p, pooled, newTerm, describe(all))
			}
			byMemory := given.To[a] == o || slices.Contains(given.Following(mNow, o, pooled), a)
			if isHonest[p] && !limited[p] && !(isFresh[p] && byMemory) {
				// (One whose whole claim the limit took lost its
				// draining address with it: the documented limit. A
				// fresh one's load balancer may publish what the
				// writer gave another before it was created - its
				// owner's own entry, racing: within the term the
				// writer's memory decides.)
				t.Fatalf("honest %s lost %s, which its load balancer publishes for it, to %s (pooled %v, new term %v; offered %v)", p, a, o, pooled, newTerm, describe(all))
			}
		}
		// Red team r6a: an honest Service absent from this pass (within the
		// term) has nothing of its placement, under the prefixes pooled
		// now, given to another: when it renders again it asks for it, and
		// the other then holds it by the writer (render.HoldOf: its ask
		// names an address the writer gave another) - but for what the
		// other keeps this pass alone, absent or held (remembered: not
		// given; the writer writes nothing for it).
		kept := remembered(now, given, all, mNow, pooled)
		for i, h := range honest {
			if newTerm || isFresh[h.who] || !all[slices.IndexFunc(all, func(x ask) bool { return x.who == h.who })].absent { // a fresh one was given nothing
				continue
			}
			for _, a := range addrs(h.fl, pooled) {
				if o := kept.To[a]; o != "" && o != h.who && !isHonest[o] && publishedFor[a] != o && !movedOnto(render.Conflict{Address: a, Holder: o}) {
					t.Fatalf("honest %s (absent, rename %v) had its address %s given to %s (pooled %v; offered %v)", honest[i].who, mNow.Subnets, a, o, pooled, describe(all))
				}
			}
		}
	})
}

// renamed is m with the admin's rename (1: subnet "lb", 2: subnet "one",
// 3: range "r"; 0: none), and how a placement naming it follows.
func renamed(m model.Model, which int) (model.Model, func(holdings.ServiceFollow) holdings.ServiceFollow) {
	out := m
	out.Subnets, out.Ranges = slices.Clone(m.Subnets), slices.Clone(m.Ranges)
	from := ""
	switch which {
	case 1, 2:
		from = out.Subnets[which-1].Name
		out.Subnets[which-1].Name += "2"
	case 3:
		from = out.Ranges[0].Name
		out.Ranges[0].Name += "2"
	}
	return out, func(fl holdings.ServiceFollow) holdings.ServiceFollow {
		switch {
		case from == "":
		case which < 3 && fl.Subnet == from:
			fl.Subnet = from + "2"
		case which == 3 && fl.Range == from:
			fl.Range = from + "2"
		}
		return fl
	}
}

// absentHonest is x (a Service's ask, or a tenant Gateway's) absent from a
// pass: what its status shows, as Writer.Services has it (absentAsk).
func absentHonest(x ask) ask { return absentAsk(x) }

// describe is the asks as offered, for a failure's message.
func describe(asks []ask) []string {
	var out []string
	for _, x := range asks {
		out = append(out, fmt.Sprintf("%s hold=%d created=%s ips=%v published=%v echoed=%v recorded=%v", x.who, x.hold, x.created.UTC().Format(time.TimeOnly), x.ips, x.seen.Published, x.seen.Echoed, x.seen.Recorded))
	}
	return out
}
