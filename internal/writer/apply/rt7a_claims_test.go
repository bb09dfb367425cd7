package apply

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// Red team r7a: HeldByEarlierStatus takes what a load balancer publishes on
// an earlier prefix as given "before the current prefix was pooled" - but a
// draining prefix is still pooled, and LB-IPAM grants a free address on it
// to whoever asks. The renumbering A -> B is under way (A draining). A
// tenant's own lbipam.cilium.io/ips takes A::1, free (web does not exist
// yet). Web is created with suffix ::1: the writer gives it B::1 and A::1;
// its load balancer grants B::1 (A::1 is the tenant's). The writer restarts
// (a new term: no memory), and the tenant, younger than nothing in
// particular, now follows the DynamicPrefix with web's suffix. Its A::1,
// renumbered, ranks HeldByEarlierStatus; web's B::1 only HeldByStatus: the
// tenant is given B::1, and web loses its whole claim - its only address
// its load balancer publishes. Within the rest of the term the writer's
// memory then holds B::1 for the tenant (HeldByWriter) after A's drain
// ends, and at the next renumbering gives it web's next address.
func TestRT7AnAddressGrantedOnTheDrainingPrefixDoesNotOutrankWebAtANewTerm(t *testing.T) {
	m := model.Model{Name: "dp", Delegated: 56}
	a, b := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64")
	pooled := []netip.Prefix{b, a} // B current, A draining
	place := holdings.ServiceFollow{Suffix: "::1"}
	web := ask{who: "default/web", namespace: "default", name: "web", created: metav1.Unix(1000, 0),
		ips: []string{"2001:db8:2::1", "2001:db8:1::1"}, place: place,
		seen: render.Seen{Published: []string{"2001:db8:2::1"}, Recorded: []string{"2001:db8:2::1", "2001:db8:1::1"}}}
	tenant := ask{who: "tenant/t0", namespace: "tenant", name: "t0", created: metav1.Unix(2000, 0), // younger than web
		ips: []string{"2001:db8:2::1", "2001:db8:1::1"}, place: place,
		seen: render.Seen{Published: []string{"2001:db8:1::1"}}}
	asks := offer([]ask{tenant, web}, render.Given{}, m, pooled, pooled)
	now := render.NewGiven()
	for _, x := range asks {
		c, ok := x.claim(now, render.Given{}, m, pooled)
		if x.who == web.who && !ok {
			t.Errorf("web lost %s to %s at a new term: the tenant's address on the draining prefix, granted after B was pooled, ranked %d, web's %d (offered %v)",
				c.Address, c.Holder, asks[0].hold, asks[1].hold, describe(asks))
		}
	}
	if got := now.To["2001:db8:2::1"]; got != web.who {
		t.Errorf("2001:db8:2::1 (published for web alone) given to %q, want %q", got, web.who)
	}
}
