package apply

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	offer(asks, nil, []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")})
	claims := render.Claims{}
	for _, x := range asks {
		if c, ok := claims.Claim(x.who, x.ips); x.who == "Gateway default/gw" && !ok {
			t.Fatalf("gw lost %s to %s (offered %v)", c.Address, c.Holder, describe(asks))
		}
	}
}
