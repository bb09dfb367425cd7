package render

import (
	"net/netip"
	"slices"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

// Hold is how an object (a Service, or a Gateway) holds the addresses it
// asks for, read only from what its owner cannot write: the claims weigh a
// stronger hold first, then age (ByAge). Its owner writes its annotations,
// its dynamic-prefix.io/managed-ips record among them, as freely as its
// suffix: a record alone would let a tenant take another's address by
// copying the suffix and the address into its own record.
type Hold int

const (
	// HoldsNothing: nothing says it holds an address it asks for.
	HoldsNothing Hold = iota
	// HeldByRecord: only its record names one. The record is its owner's to
	// write, so this breaks a tie only between asks that nothing else
	// tells apart (no load balancer publishes, and the writer just started).
	HeldByRecord
	// HeldByEcho: its controller publishes one in a status that reports
	// what its owner's spec chose (a Gateway's status.addresses echo its
	// spec.addresses): the owner cannot write the status, but it steers it,
	// so this outweighs only the owner's record.
	HeldByEcho
	// HeldByStatus: its load balancer publishes one in a status its owner
	// neither writes nor chooses (a Service's status.loadBalancer.ingress,
	// written by LB-IPAM, MetalLB or kube-vip from their own pools).
	HeldByStatus
	// HeldByEarlierStatus: its load balancer publishes, on a prefix that
	// handed out addresses before the current one (Earlier: draining, or
	// gone), one it asks for or one its placement then puts, renumbered,
	// where it asks now (Renumbered). One on the current prefix
	// may have been granted to a tenant's own lbipam.cilium.io/ips entry,
	// waiting when the pool got the prefix, before the writer asked for it
	// on the holder's behalf; at a new leader term, which has no memory of
	// what was given, that status tied with the holder's on its draining
	// address, age decided, and the holder lost its whole claim (red team
	// r6a). Its placement's address on the earlier prefix is the holder's
	// alone: the load balancer gives one address to one object. But not
	// before the other's status of that very address: an earlier prefix
	// still draining is still pooled, and a tenant's own
	// lbipam.cilium.io/ips may take a free address on it after the current
	// prefix was pooled (red team r7a: web created since); the claims
	// (apply's offer) leave out, renumbered, what another's load balancer
	// publishes now.
	HeldByEarlierStatus
	// HeldByWriter: this writer gave it one in its last pass of this leader
	// term (Given.To), or gave it the placement that puts it there under a
	// prefix pooled now (Given.Following: its address, renumbered). A new
	// term forgets it and starts from what the load balancers publish.
	HeldByWriter
)

// Given is what the writer gave in its last pass over a DynamicPrefix: who
// got each address (To: the Claims it ended with), and where each of them
// asked for its addresses (Placed: its suffix on the prefix, on a subnet of
// the delegation or in an address range). What it gave follows the object,
// not the address: a renumbering with no drain makes every address new, and
// who held web's address must still be web, wherever web's placement puts
// it - not a tenant whose record already names the address under the next
// prefix.
type Given struct {
	To     Claims
	Placed map[string]Placement // who -> the placement it won with, resolved
}

// NewGiven is an empty Given, ready for a pass's claims.
func NewGiven() Given {
	return Given{To: Claims{}, Placed: map[string]Placement{}}
}

// Placement is where a placement put an object, resolved against the spec
// it was won under: its suffix on the advertised prefix, on a subnet (the
// subnet's offset and length in the delegation) or in an address range
// (the range's bounds) - what the names meant, not the names. An honest
// rename of a subnet or range changes no address, so it keeps the
// placement; remembered by name, the placement followed nowhere after a
// rename, and a younger tenant following the renamed subnet with web's
// suffix was given web's next address (red team r6a).
type Placement struct {
	Suffix string
	Subnet model.Subnet // Length 0: not on a subnet (Name unused)
	Range  model.Range  // Start invalid: not in a range (Name unused)
}

// placedName is the name a resolved subnet or range goes by in the
// one-entry model Address builds.
const placedName = "placed"

// PlacementOf is f resolved against m: false where m does not resolve its
// subnet or range (then it follows nowhere).
func PlacementOf(m model.Model, f holdings.ServiceFollow) (Placement, bool) {
	out := Placement{Suffix: f.Suffix}
	if f.Subnet != "" {
		i := slices.IndexFunc(m.Subnets, func(s model.Subnet) bool { return s.Name == f.Subnet })
		if i < 0 || f.Range != "" {
			return Placement{}, false
		}
		out.Subnet = m.Subnets[i]
		out.Subnet.Name = placedName
	}
	if f.Range != "" {
		i := slices.IndexFunc(m.Ranges, func(r model.Range) bool { return r.Name == f.Range })
		if i < 0 || !m.Ranges[i].Start.IsValid() {
			return Placement{}, false
		}
		out.Range = m.Ranges[i]
		out.Range.Name = placedName
	}
	return out, true
}

// Address is where p lies under prefix on, with m's delegation length (the
// subnet or range placed in the delegation of on).
func (p Placement) Address(m model.Model, on netip.Prefix) (netip.Addr, error) {
	placed := model.Model{Name: m.Name, Delegated: m.Delegated}
	f := holdings.ServiceFollow{Suffix: p.Suffix}
	if p.Subnet.Length != 0 {
		placed.Subnets, f.Subnet = []model.Subnet{p.Subnet}, placedName
	}
	if p.Range.Start.IsValid() {
		placed.Ranges, f.Range = []model.Range{p.Range}, placedName
	}
	return ServiceAddress(placed, f, on)
}

// Following is where the writer's last pass placed who, under each prefix
// of pooled (canonical): what it gave who, renumbered. A placement that no
// longer fits (the delegation's length changed under it) follows nowhere;
// a subnet or range renamed since changes nothing. Another's placement
// copied since is not who's: the writer remembers the one who won with.
func (g Given) Following(m model.Model, who string, pooled []netip.Prefix) []string {
	f, ok := g.Placed[who]
	if !ok {
		return nil
	}
	var out []string
	for _, p := range pooled {
		if a, err := f.Address(m, p); err == nil {
			out = append(out, a.String())
		}
	}
	return out
}

// Won claims ips for who (Claims.Claim) and, if it wins, remembers the
// placement it won with - only where the claim holds every address that
// placement puts on pooled, and at least one. A claim of nothing (the
// addresses already the owner's own entries, or a mapped target) or of part
// of them wins without taking the addresses: remembering its placement would
// give it, at the next renumbering, the address of whoever holds them now
// (red team r4a: a tenant's Service listing web's address as its own
// lbipam.cilium.io/ips, or a Gateway listing it in spec.addresses).
func (g Given) Won(m model.Model, pooled []netip.Prefix, who string, ips []string, place holdings.ServiceFollow) (Conflict, bool) {
	c, ok := g.To.Claim(who, ips)
	if !ok || len(ips) == 0 {
		return c, ok
	}
	for _, p := range pooled {
		if a, err := ServiceAddress(m, place, p); err == nil && !slices.Contains(ips, a.String()) {
			return c, ok
		}
	}
	if at, resolved := PlacementOf(m, place); resolved {
		g.Placed[who] = at
	}
	return c, ok
}

// Seen is what, besides the writer's memory, says an object holds an
// address (each canonical).
type Seen struct {
	Published []string // its load balancer's status, which its owner does not choose
	// Earlier: what Published names on a prefix handed out before the
	// current one, and renumbered onto the prefixes pooled now (Renumbered).
	Earlier  []string
	Echoed   []string // its controller's status, echoing its owner's spec
	Recorded []string // its dynamic-prefix.io/managed-ips record
}

// HoldOf is how who holds one of ips (canonical), given what seen says, who
// the writer gave each address in its last pass (given), and where it placed
// who then, under the prefixes pooled now (following: Given.Following). An
// address the writer gave another is never who's by its placement, and an
// ask naming one holds nothing by the writer: a hold is of the whole ask,
// so one address of its own would otherwise put the other's first in line
// (red team r5: a tenant's lbipam.cilium.io/ips listing its address and
// web's next one).
func HoldOf(who string, ips []string, seen Seen, given Claims, following []string) Hold {
	asks := func(have []string) bool {
		return slices.ContainsFunc(have, func(a string) bool { return slices.Contains(ips, a) })
	}
	anothers := slices.ContainsFunc(ips, func(a string) bool { return given[a] != "" && given[a] != who })
	switch {
	case !anothers && slices.ContainsFunc(ips, func(a string) bool {
		return given[a] == who || given[a] == "" && slices.Contains(following, a)
	}):
		return HeldByWriter
	case asks(seen.Earlier):
		return HeldByEarlierStatus
	case asks(seen.Published):
		return HeldByStatus
	case asks(seen.Echoed):
		return HeldByEcho
	case asks(seen.Recorded):
		return HeldByRecord
	}
	return HoldsNothing
}
