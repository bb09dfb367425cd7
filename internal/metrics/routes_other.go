//go:build !linux

package metrics

import "net/netip"

// KernelRoutes finds no route off Linux: clients are prefixes (Client).
type KernelRoutes struct{}

// Route finds none.
func (KernelRoutes) Route(netip.Addr) (Route, bool) { return Route{}, false }
