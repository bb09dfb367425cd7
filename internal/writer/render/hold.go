package render

import "slices"

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
	// HeldByStatus: its load balancer publishes one (a Service's
	// status.loadBalancer.ingress, a Gateway's status.addresses): the
	// status is a subresource its owner's rights over the object do not
	// reach, written by LB-IPAM, MetalLB or the Gateway controller.
	HeldByStatus
	// HeldByWriter: this writer gave it one in its last pass of this leader term
	// (Claims kept as Given). A new term forgets it and starts from what
	// the load balancers publish.
	HeldByWriter
)

// Given is who the writer gave each address in its last pass over a
// DynamicPrefix (the Claims it ended with).
type Given Claims

// HoldOf is how who holds one of ips (canonical), given what its load
// balancer publishes (published), what its record names (recorded) and
// what the writer gave in its last pass.
func HoldOf(who string, ips, published, recorded []string, given Given) Hold {
	asks := func(have []string) bool {
		return slices.ContainsFunc(have, func(a string) bool { return slices.Contains(ips, a) })
	}
	switch {
	case slices.ContainsFunc(ips, func(a string) bool { return given[a] == who }):
		return HeldByWriter
	case asks(published):
		return HeldByStatus
	case asks(recorded):
		return HeldByRecord
	}
	return HoldsNothing
}
