package render

import (
	"net/netip"
	"slices"
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
	// HeldByWriter: this writer gave it one in its last pass of this leader
	// term (Claims kept as Given), or gave it the same address under a prefix
	// the renumbering replaced (same host bits under a pooled prefix). A new
	// term forgets it and starts from what the load balancers publish.
	HeldByWriter
)

// Given is who the writer gave each address in its last pass over a
// DynamicPrefix (the Claims it ended with).
type Given Claims

// Seen is what, besides the writer's memory, says an object holds an
// address (each canonical).
type Seen struct {
	Published []string // its load balancer's status, which its owner does not choose
	Echoed    []string // its controller's status, echoing its owner's spec
	Recorded  []string // its dynamic-prefix.io/managed-ips record
}

// Holders is what the writer gave each object in its last pass: Given
// turned round, read once per pass.
func (g Given) Holders() map[string][]string {
	out := map[string][]string{}
	for a, who := range g {
		out[who] = append(out[who], a)
	}
	return out
}

// HoldOf is how who holds one of ips (canonical), given what seen says and
// what the writer gave in its last pass (given; mine: what it gave who, of
// Holders); pooled are the prefixes the pools hold now, under which an
// address the writer gave is matched by its host bits too: a renumbering
// with no drain makes every address new, and who held web's address must
// still be web, not a tenant whose record already names the address under
// the next prefix.
func HoldOf(who string, ips []string, seen Seen, given Given, mine []string, pooled []netip.Prefix) Hold {
	asks := func(have []string) bool {
		return slices.ContainsFunc(have, func(a string) bool { return slices.Contains(ips, a) })
	}
	switch {
	case slices.ContainsFunc(ips, func(a string) bool { return given[a] == who || renumbered(a, mine, given, pooled) }):
		return HeldByWriter
	case asks(seen.Published):
		return HeldByStatus
	case asks(seen.Echoed):
		return HeldByEcho
	case asks(seen.Recorded):
		return HeldByRecord
	}
	return HoldsNothing
}

// renumbered: a is under a pooled prefix, nobody was given a itself, and
// mine holds an address with a's host bits under that prefix's length - a
// with its prefix renumbered. Another's suffix copied gives other host bits.
func renumbered(a string, mine []string, given Given, pooled []netip.Prefix) bool {
	addr, err := netip.ParseAddr(a)
	if err != nil || given[a] != "" {
		return false
	}
	for _, p := range pooled {
		if !p.Contains(addr) {
			continue
		}
		for _, g := range mine {
			if old, err := netip.ParseAddr(g); err == nil && old.Is6() == addr.Is6() && sameHost(old, addr, p.Bits()) {
				return true
			}
		}
	}
	return false
}

// sameHost: a and b agree on every bit after the first bits.
func sameHost(a, b netip.Addr, bits int) bool {
	x, y := a.As16(), b.As16()
	if a.Is4() {
		bits += 96
	}
	for i := range 16 {
		keep := byte(0xff)
		switch {
		case (i+1)*8 <= bits:
			keep = 0
		case i*8 < bits:
			keep = 0xff >> (bits - i*8)
		}
		if x[i]&keep != y[i]&keep {
			return false
		}
	}
	return true
}
