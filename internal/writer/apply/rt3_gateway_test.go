package apply

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// TestRT3AnOlderTenantGatewayEchoingAGatewaysAddressDoesNotTakeIt: the
// second red team's finding 3 with a Gateway as the holder. At a new
// leader term (no memory), the honest Gateway default/gw holds its address
// by its controller's status.addresses (HeldByEcho); a tenant's older
// Gateway puts the same address (and gw's suffix) in its own spec.addresses,
// which a controller that reports its spec echoes too (render.HeldByEcho's
// premise): both hold by echo, and age gives it to the tenant. The fix for
// finding 3 ranked an echo below a Service's load balancer; between two
// Gateways nothing outranks the owner's own choice.
func TestRT3AnOlderTenantGatewayEchoingAGatewaysAddressDoesNotTakeIt(t *testing.T) {
	const a = "2001:db8:1::10"
	asks := []ask{
		{who: "Gateway default/gw", kind: "Gateway", namespace: "default", name: "gw", created: metav1.Unix(1000, 0), ips: []string{a},
			seen: render.Seen{Echoed: []string{a}, Recorded: []string{a}}},
		{who: "Gateway tenant/old", kind: "Gateway", namespace: "tenant", name: "old", created: metav1.Unix(0, 0), ips: []string{a},
			seen: render.Seen{Echoed: []string{a}, Recorded: []string{a}}},
	}
	offer(asks, render.Given{}, model.Model{}, []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")})
	claims := render.Claims{}
	for _, x := range asks {
		if c, ok := claims.Claim(x.who, x.ips); x.who == "Gateway default/gw" && !ok {
			t.Fatalf("gw lost %s to %s (offered %v)", c.Address, c.Holder, describe(asks))
		}
	}
}

// TestRT3AYoungerTenantGatewayDoesNotTakeTheAddressOfAServiceNoLoadBalancerPublishes:
// docs/security.md - "an object no load balancer publishes for (a Service
// not of type LoadBalancer, or one whose load balancer has not answered
// yet) holds only by the writer's memory; across a writer restart, two such
// asks are told apart by their records and then their age". A tenant's
// Gateway is not such an ask: at a new term its echo of the address it put
// in its own spec.addresses (HeldByEcho) outranks web's record, so a Gateway
// created after web takes web's address - age never comes into it.
func TestRT3AYoungerTenantGatewayDoesNotTakeTheAddressOfAServiceNoLoadBalancerPublishes(t *testing.T) {
	const a = "2001:db8:1::1"
	asks := []ask{
		{who: "default/web", namespace: "default", name: "web", created: metav1.Unix(0, 0), ips: []string{a},
			seen: render.Seen{Recorded: []string{a}}},
		{who: "Gateway tenant/new", kind: "Gateway", namespace: "tenant", name: "new", created: metav1.Unix(1000, 0), ips: []string{a},
			seen: render.Seen{Echoed: []string{a}}},
	}
	offer(asks, render.Given{}, model.Model{}, []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")})
	claims := render.Claims{}
	for _, x := range asks {
		if c, ok := claims.Claim(x.who, x.ips); x.who == "default/web" && !ok {
			t.Fatalf("web, the older, lost %s to %s (offered %v)", c.Address, c.Holder, describe(asks))
		}
	}
}
