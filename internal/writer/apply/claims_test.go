package apply

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/render"
)

// FuzzATenantTakesNoAddressItWasNotGiven plays one tenant against the
// claims (offer, then render.Claims in that order, as Writer.Services
// weighs them). Two honest Services, each with a suffix of its own, were
// given their addresses in the writer's last pass; the prefixes may then be
// renumbered (a new one in front, the old one draining, or gone at once).
// The fuzzer plays up to three tenant objects: each picks any suffix (an
// honest one's too), any creation time (older than everyone), any record
// naming any address, and any status the load balancer could publish for
// it - any address not published for another object (a tenant's own
// lbipam.cilium.io/ips may win it a new address before the writer asks for
// it) - or, as a Gateway, any status.addresses at all (its controller echoes
// the spec the tenant writes). Property: every
// honest Service wins its whole claim. In a new leader term (no memory of
// what was given) the fuzzer may not give a tenant status on an address an
// honest Service asks for (docs/security.md: across a restart in that
// window age decides); the honest Services hold by the addresses their load
// balancer publishes, which the fuzzer chooses among theirs (at least one).
func FuzzATenantTakesNoAddressItWasNotGiven(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 3, 0, 1, 0xff, 0x0f, 1, 0, 0xff, 0x3})       // renumbered, a tenant copies web's suffix, forges, is older
	f.Add([]byte{1, 1, 3, 1, 0xff, 0x0f, 0x0c, 1, 2, 0xff, 0x3}) // a new term, tenants published on their own
	f.Add([]byte{1, 0, 2, 0, 0, 0x0f, 0x0c, 0, 1, 0, 0xf0, 0xff})
	f.Add([]byte{2, 0, 0, 0, 1, 0, 0, 0x10, 0, 0, 0, 0}) // renumbered with no drain, a tenant records web's next address
	f.Add([]byte{1, 1, 0, 0, 1, 0, 0, 0, 0, 0x01, 0, 1}) // a new term, an older tenant Gateway echoes web's address

	const prefixes, suffixes = 3, 4
	addr := func(p, s int) string { return fmt.Sprintf("2001:db8:%d::%d", p+1, s+1) }
	f.Fuzz(func(t *testing.T, in []byte) {
		next := func() int {
			if len(in) == 0 {
				return 0
			}
			b := in[0]
			in = in[1:]
			return int(b)
		}
		pooledBefore := []int{0}
		pooled := pooledBefore
		switch next() % 3 {
		case 1:
			pooled = []int{1, 0} // renumbered: 1 current, 0 draining
		case 2:
			pooled = []int{1} // renumbered with no drain: 0 gone at once
		}
		newTerm := next()%2 == 1
		if newTerm && len(pooled) == 1 && pooled[0] == 1 {
			// Nothing the new leader reads names the new addresses: not
			// covered (docs/security.md), the fuzzer stays within the term.
			newTerm = false
		}
		asks := func(suffix int, on []int) []string {
			var out []string
			for _, p := range on {
				out = append(out, addr(p, suffix))
			}
			return out
		}
		// The writer's last pass gave the honest Services their addresses.
		honest := []struct {
			who    string
			suffix int
		}{{"default/web", 0}, {"default/api", 1}}
		isHonest := map[string]bool{}
		given := render.Given{}
		for _, h := range honest {
			isHonest[h.who] = true
			for _, a := range asks(h.suffix, pooledBefore) {
				given[a] = h.who
			}
		}
		if newTerm {
			given = nil
		}
		publishedFor := map[string]string{} // address -> the one object it is published for
		var all []ask
		for _, h := range honest {
			x := ask{who: h.who, namespace: "default", name: h.who[len("default/"):], created: metav1.Unix(1000, 0), ips: asks(h.suffix, pooled)}
			mask := next()
			for i, a := range asks(h.suffix, pooledBefore) {
				if mask&(1<<i) != 0 || newTerm && i == 0 {
					x.seen.Published = append(x.seen.Published, a)
					publishedFor[a] = h.who
				}
			}
			x.seen.Recorded = asks(h.suffix, pooledBefore)
			all = append(all, x)
		}
		for i := range next() % 4 {
			who := fmt.Sprintf("tenant/t%d", i)
			x := ask{who: who, namespace: "tenant", name: fmt.Sprintf("t%d", i), created: metav1.Unix(int64(next()%3)*900, 0)}
			x.ips = asks(next()%suffixes, pooled)
			rec, pub := next()|next()<<8, next()|next()<<8
			// A Gateway: its status echoes its spec.addresses, any
			// address its owner chooses (HeldByEcho).
			gateway := next()%2 == 1
			for p := range prefixes {
				for s := range suffixes {
					a, bit := addr(p, s), 1<<(p*suffixes+s)
					if rec&bit != 0 {
						x.seen.Recorded = append(x.seen.Recorded, a)
					}
					honestAsks := slices.ContainsFunc(all[:len(honest)], func(h ask) bool { return slices.Contains(h.ips, a) })
					switch {
					case pub&bit == 0:
					case gateway:
						x.seen.Echoed = append(x.seen.Echoed, a)
					case publishedFor[a] == "" && !(newTerm && honestAsks):
						x.seen.Published = append(x.seen.Published, a)
						publishedFor[a] = who
					}
				}
			}
			all = append(all, x)
		}
		slices.Reverse(all) // the cache lists them in any order
		var prefixed []netip.Prefix
		for _, p := range pooled {
			prefixed = append(prefixed, netip.MustParsePrefix(fmt.Sprintf("2001:db8:%d::/48", p+1)))
		}
		offer(all, given, prefixed)
		claims := render.Claims{}
		for _, x := range all {
			c, ok := claims.Claim(x.who, x.ips)
			if isHonest[x.who] && !ok {
				t.Fatalf("honest %s lost %s to %s (new term %v; offered %v)", x.who, c.Address, c.Holder, newTerm, describe(all))
			}
		}
	})
}

// describe is the asks as offered, for a failure's message.
func describe(asks []ask) []string {
	var out []string
	for _, x := range asks {
		out = append(out, fmt.Sprintf("%s hold=%d created=%s ips=%v published=%v echoed=%v recorded=%v", x.who, x.hold, x.created.UTC().Format(time.TimeOnly), x.ips, x.seen.Published, x.seen.Echoed, x.seen.Recorded))
	}
	return out
}
