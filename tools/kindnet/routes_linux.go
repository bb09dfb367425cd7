//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"net"
	"slices"

	"github.com/vishvananda/netlink"
)

// syncRoutes replaces the routes this daemon added before (applied) by want;
// routes that did not change are left alone.
func syncRoutes(log *slog.Logger, applied, want []Route) ([]Route, error) {
	for _, r := range applied {
		if !slices.Contains(want, r) {
			if err := netlink.RouteDel(route(r)); err != nil {
				log.Warn("removing route", "dst", r.Dst, "err", err)
			}
		}
	}
	for _, r := range want {
		if slices.Contains(applied, r) {
			continue
		}
		if err := netlink.RouteReplace(route(r)); err != nil {
			return applied, fmt.Errorf("route %s via %s: %w", r.Dst, r.Via, err)
		}
		log.Info("route", "dst", r.Dst, "via", r.Via)
	}
	return want, nil
}

func route(r Route) *netlink.Route {
	return &netlink.Route{
		Dst: &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), r.Dst.Addr().BitLen())},
		Gw:  r.Via.AsSlice(),
	}
}
