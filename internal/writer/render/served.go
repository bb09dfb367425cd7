package render

import (
	"slices"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Served is where the load balancers serve a Service's addresses: what its
// own status.loadBalancer.ingress publishes, and who else one publishes an
// address for. The writer's claims give an address to one object, but a
// load balancer gives it to whoever asked first: a tenant's own
// lbipam.cilium.io/ips waiting for the next address of web's when the pool
// gains the prefix is granted it before the writer asks for it on web's
// behalf (red team r6a). A DNS target on it would send web's traffic to the
// tenant.
type Served struct {
	// Self is the Service ("namespace/name"): Others may name it where they
	// are read later than Ingress (a live index beside the pass's copy).
	Self string
	// Ingress are the addresses its load balancer publishes for it.
	Ingress []string
	// Others returns who else (a Service "namespace/name", a Gateway
	// "Gateway namespace/name") a load balancer publishes addr for; nil:
	// nobody.
	Others func(addr string) []string
}

// Elsewhere returns who a load balancer publishes addr for when it does not
// publish it for the Service itself ("" if nobody): one it publishes for
// the Service is the Service's, whoever shares it (a sharing key), whether
// Ingress says so or Others, read later, does.
func (s Served) Elsewhere(addr string) string {
	if s.Others == nil || slices.Contains(s.Ingress, addr) {
		return ""
	}
	if others := s.Others(addr); len(others) > 0 && !slices.Contains(others, s.Self) {
		return slices.Min(others) // one name, the same every pass
	}
	return ""
}

// PublishedElsewhere is each of ips (the addresses the writer gives who)
// that a load balancer publishes for another object only: a conflict the
// writer's claims cannot settle (Conflict.Published).
func PublishedElsewhere(who string, ips []string, s Served) []Conflict {
	var out []Conflict
	for _, a := range ips {
		if other := s.Elsewhere(a); other != "" {
			out = append(out, Conflict{Address: a, Holder: other, Loser: who, Published: true})
		}
	}
	return out
}

// target is where a Service's DNS target goes among addrs (the current
// address first): the current address, or while its load balancer has not
// published it yet the targets it held (Held) - but never an address a
// load balancer publishes for another object only. There it stays on an
// address of addrs published for the Service itself (its draining one),
// else it has none.
func target(live holdings.Annotations, addrs []string, s Served) []string {
	if held := Held(live, addrs, s.Ingress); held != nil {
		return held
	}
	if s.Elsewhere(addrs[0]) == "" {
		return addrs[:1]
	}
	for _, a := range addrs[1:] {
		if slices.Contains(s.Ingress, a) {
			return []string{a}
		}
	}
	return nil
}
