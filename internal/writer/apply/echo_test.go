package apply

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// What a Gateway's controller echoes from its spec (status.addresses) ranks
// between a load balancer's status and the owner's own record
// (render.HeldByEcho), and where two asks hold alike the older wins. At a new
// leader term, with no memory of what the writer gave, that is all there is
// to go on, and docs/security.md names what it cannot tell apart: an echo
// outranks the record of an object no load balancer publishes for, and two
// Gateways echoing one address go by age. Both are what an honest Gateway
// needs against an older tenant Service that copies its suffix and forges
// its record (TestANewTermReadsWhoHoldsAGatewaysAddressFromItsStatus: with
// the echo ranked as a record it fails); the third red team's two cases are
// here as those limits, and within the term the writer's memory decides.
func TestAnEchoOutranksARecordAndTwoEchoesGoByAge(t *testing.T) {
	const a = "2001:db8:1::10"
	pooled := []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")}
	young, old := metav1.Unix(1000, 0), metav1.Unix(0, 0)
	gateway := func(ns string, created metav1.Time, echoed bool) ask {
		x := ask{who: "Gateway " + ns + "/gw", kind: "Gateway", namespace: ns, name: "gw", created: created, ips: []string{a},
			place: holdings.ServiceFollow{Suffix: "::10"}, seen: render.Seen{Recorded: []string{a}}}
		if echoed {
			x.seen.Echoed = []string{a}
		}
		return x
	}
	service := func(ns string, created metav1.Time) ask {
		return ask{who: ns + "/web", namespace: ns, name: "web", created: created, ips: []string{a},
			place: holdings.ServiceFollow{Suffix: "::10"}, seen: render.Seen{Recorded: []string{a}}}
	}
	gaveTo := func(who string) render.Given {
		return render.Given{To: render.Claims{a: who}, Placed: map[string]render.Placement{who: {Suffix: "::10"}}}
	}
	for _, tc := range []struct {
		name  string
		given render.Given
		asks  []ask
		want  string
	}{
		{"a new term: the Gateway its controller serves from keeps it against an older Service's forged record",
			render.Given{}, []ask{gateway("default", young, true), service("tenant", old)}, "Gateway default/gw"},
		{"a new term: a younger tenant Gateway's echo outranks the record of a Service no load balancer publishes for (a limit)",
			render.Given{}, []ask{service("default", old), gateway("tenant", young, true)}, "Gateway tenant/gw"},
		{"a new term: of two Gateways echoing one address the older keeps it (a limit)",
			render.Given{}, []ask{gateway("default", young, true), gateway("tenant", old, true)}, "Gateway tenant/gw"},
		{"within the term the writer's memory outweighs a younger Gateway's echo",
			gaveTo("default/web"), []ask{service("default", old), gateway("tenant", young, true)}, "default/web"},
		{"within the term the writer's memory outweighs an older Gateway's echo",
			gaveTo("Gateway default/gw"), []ask{gateway("default", young, true), gateway("tenant", old, true)}, "Gateway default/gw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offer(tc.asks, tc.given, model.Model{}, pooled, pooled)
			claims := render.Claims{}
			for _, x := range tc.asks {
				claims.Claim(x.who, x.ips)
			}
			if diff := cmp.Diff(tc.want, claims[a]); diff != "" {
				t.Errorf("who keeps %s (-want +got):\n%s\noffered %v", a, diff, describe(tc.asks))
			}
		})
	}
}
