package metrics

import (
	"net"
	"net/netip"
	"strconv"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// KernelRoutes asks the kernel how the node answers a source (Conns.Routes):
// the route it matches (RTM_F_FIB_MATCH), in H's network namespace (nil:
// the caller's).
type KernelRoutes struct{ H *netlink.Handle }

// Route is the kernel's route to a; false when there is none, or it is the
// node's own address (answered on loopback: the kubelet's probes).
func (k KernelRoutes) Route(a netip.Addr) (Route, bool) {
	get := netlink.RouteGetWithOptions
	if k.H != nil {
		get = k.H.RouteGetWithOptions
	}
	rs, err := get(net.IP(a.AsSlice()), &netlink.RouteGetOptions{FIBMatch: true})
	if err != nil || len(rs) == 0 || rs[0].Type == unix.RTN_LOCAL {
		return Route{}, false
	}
	r := rs[0]
	return routeOf(r.LinkIndex, r.Gw != nil || r.Via != nil, r.Dst == nil || isDefault(r.Dst), int(r.Protocol)), true
}

// routeOf is a kernel route as ClientOf reads it: a gateway is the link's
// word when the route is a default one or an RA or a redirect set it.
func routeOf(link int, gateway, isDefault bool, protocol int) Route {
	learned := gateway && (isDefault || protocol == unix.RTPROT_RA || protocol == unix.RTPROT_REDIRECT)
	return Route{Link: strconv.Itoa(link), Direct: !gateway, Learned: learned}
}

func isDefault(p *net.IPNet) bool { ones, _ := p.Mask.Size(); return ones == 0 }
