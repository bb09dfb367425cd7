package render

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ServiceAddressConflict is the condition (and the events' reason) of a
// DynamicPrefix two of whose Services or Gateways ask for one address:
// renumber does not leave it to the load balancer's race after every
// renumbering.
const ServiceAddressConflict = "ServiceAddressConflict"

// ReasonPublishedElsewhere is ServiceAddressConflict's reason while an
// address the writer gave one object is published for another
// (Conflict.Published): Ready is False.
const ReasonPublishedElsewhere = "AddressPublishedForAnother"

// Conflict is one address two Services (or Gateways: "Gateway
// namespace/name") following one DynamicPrefix ask for. The one that holds it most strongly (Hold: read from what its
// owner cannot write) keeps it, else the one that asked first (created first; then by namespace and name); Loser gets no
// address of renumber's until the conflict is gone (its user's entries stay).
//
// Published is the other kind: the writer gave Address to Loser, but a load
// balancer publishes it for Holder (and not for Loser) - Holder's own
// lbipam.cilium.io/ips, say, asked for it and was granted it first. The
// writer's claims cannot move it; Loser keeps asking for it, its DNS target
// is not it (PublishedElsewhere), and the DynamicPrefix is not Ready.
type Conflict struct {
	Address       string
	Holder, Loser string // namespace/name of a Service, "Gateway namespace/name"
	Published     bool
}

// Claims tracks which Service or Gateway holds which address, in the order Services
// are offered (ByAge).
type Claims map[string]string

// Claim gives the Service who the addresses ips unless an earlier one holds
// one of them: then it returns that conflict and claims nothing.
func (c Claims) Claim(who string, ips []string) (Conflict, bool) {
	for _, a := range ips {
		if holder, ok := c[a]; ok && holder != who {
			return Conflict{Address: a, Holder: holder, Loser: who}, false
		}
	}
	for _, a := range ips {
		c[a] = who
	}
	return Conflict{}, true
}

// ByAge orders Services as their claims are honoured: the oldest first,
// then by namespace and name (one creation second holds several).
func ByAge(a, b *corev1.Service) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// ServiceConflictMessage says which Services and Gateways ask for one address,
// and who keeps it; and which address given to one a load balancer
// publishes for another.
func ServiceConflictMessage(cs []Conflict) string {
	const show = 5
	var parts []string
	asked := false
	for _, c := range cs {
		asked = asked || !c.Published
	}
	for _, c := range cs[:min(len(cs), show)] {
		if c.Published {
			parts = append(parts, fmt.Sprintf("%s is renumber's address for %s, but a load balancer publishes it for %s (%s's DNS target is not it until %s lets it go)",
				c.Address, c.Loser, c.Holder, c.Loser, c.Holder))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s is asked for by %s and %s (%s keeps it; %s gets none of renumber's addresses)",
			c.Address, c.Holder, c.Loser, c.Holder, c.Loser))
	}
	msg := strings.Join(parts, "; ")
	if len(cs) > show {
		msg += fmt.Sprintf("; and %d more", len(cs)-show)
	}
	if !asked {
		return msg
	}
	return msg + ": give each Service and Gateway its own dynamic-prefix.io/suffix"
}

// AnyPublished reports whether one of cs is an address a load balancer
// publishes for another than the one it was given (Conflict.Published).
func AnyPublished(cs []Conflict) bool {
	return slices.ContainsFunc(cs, func(c Conflict) bool { return c.Published })
}

// SortConflicts puts cs in a stable order (a status compares them).
func SortConflicts(cs []Conflict) {
	slices.SortFunc(cs, func(a, b Conflict) int {
		return cmp.Or(cmp.Compare(a.Loser, b.Loser), cmp.Compare(a.Address, b.Address))
	})
}
