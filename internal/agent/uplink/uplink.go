// Package uplink decides which links the agent follows: its own --interface
// links plus every interface a DynamicPrefix names. It reads DynamicPrefixes
// from their JSON into the API types the writer reads too
// (internal/dynamicprefix, which links no apimachinery).
package uplink

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"

	"github.com/renumber/renumber/internal/agent/dhcp6"
	"github.com/renumber/renumber/internal/agent/kubehttp"
	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/dynamicprefix"
)

// Follower is what one DynamicPrefix asks of the agents.
type Follower struct {
	Interface  string // "": the agents' --interface links
	GlobalOnly bool   // spec.acquisition.prefixFilter.requireGlobalUnicast (default true)
	// Trusted: routerAdvertisement.trustedRouters (nil: every router).
	Trusted []netip.Addr
	// MinLength, MaxLength: prefixFilter.min/maxPrefixLength (0: none).
	MinLength, MaxLength int
	// Delegated: this follows spec.acquisition.dhcpv6pd on Interface: the
	// prefixes delegated to the node are reported there (host mode).
	Delegated bool
	// FollowDeprecated: routerAdvertisement.followDeprecated.
	FollowDeprecated bool
}

// Equal compares two followers.
func (f Follower) Equal(o Follower) bool {
	return f.Interface == o.Interface && f.GlobalOnly == o.GlobalOnly && slices.Equal(f.Trusted, o.Trusted) &&
		f.MinLength == o.MinLength && f.MaxLength == o.MaxLength && f.Delegated == o.Delegated &&
		f.FollowDeprecated == o.FollowDeprecated
}

// object is the part of a DynamicPrefix read here: the spec in the API types
// both binaries share, and the node the writer named for the DHCPv6 client.
type object struct {
	Metadata struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
		// DeletionTimestamp: being deleted (a finalizer holds it).
		DeletionTimestamp string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec   dynamicprefix.Spec `json:"spec"`
	Status struct {
		DHCPv6PD *dynamicprefix.DHCPv6PDStatus `json:"dhcpv6pd"`
	} `json:"status"`
}

// Client returns the DHCPv6 client this node must run for one DynamicPrefix:
// its spec asks for the built-in client (dhcpv6pd.mode client, the default)
// and the writer named node in status.dhcpv6pd.clientNode - or, named in
// confirmerNode, the prober that confirms the client's delegation (asked
// again when dhcpv6pd.unconfirmed changes). A DynamicPrefix being deleted
// runs none: the writer frees its interface for the next by name at once
// (controller.PDClients), and a finalizer the writer does not own may hold
// the object for long.
func Client(raw []byte, node string) (dhcp6.Want, bool) {
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return dhcp6.Want{}, false
	}
	pd := o.Spec.Acquisition.DHCPv6PD
	st := o.Status.DHCPv6PD
	if o.Metadata.DeletionTimestamp != "" || pd == nil || pd.Interface == "" || !pd.Client() || st == nil || node == "" || st.ClientNode != node && st.ConfirmerNode != node {
		return dhcp6.Want{}, false
	}
	w := dhcp6.Want{Name: o.Metadata.Name, UID: o.Metadata.UID, Link: pd.Interface, Length: pd.RequestedLength(),
		Servers: dhcp6.ServersOf(pd.Servers())}
	if st.ClientNode != node {
		w.Confirm, w.Ask = true, st.Unconfirmed
	}
	return w, true
}

// Decode reads one DynamicPrefix: what it asks of the agents for Router
// Advertisements (none when not followed: not configured, or enabled: false),
// then for DHCPv6-PD (when configured).
func Decode(raw []byte) ([]Follower, error) {
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("uplink: decoding DynamicPrefix: %w", err)
	}
	a := o.Spec.Acquisition
	base := Follower{GlobalOnly: a.PrefixFilter.GlobalOnly()}
	base.MinLength, base.MaxLength = a.PrefixFilter.LengthBounds()
	var out []Follower
	if ra := a.RouterAdvertisement; ra.Followed() {
		f, err := decodeRA(base, ra.Interface, ra.TrustedRouters)
		if err != nil {
			return nil, err
		}
		f.FollowDeprecated = ra.FollowDeprecated
		out = append(out, f)
	}
	if pd := a.DHCPv6PD; pd != nil && pd.Interface != "" {
		f := base
		f.Interface, f.Delegated = pd.Interface, true
		out = append(out, f)
	}
	return out, nil
}

func decodeRA(f Follower, iface string, trusted []string) (Follower, error) {
	f.Interface = iface
	for _, r := range trusted {
		addr, err := netip.ParseAddr(r)
		if err != nil || !addr.Is6() || !addr.IsLinkLocalUnicast() {
			// The schema refuses this; believing every router instead would
			// be the unsafe reading.
			return Follower{}, fmt.Errorf("uplink: trustedRouters: %q is not an IPv6 link-local address", r)
		}
		f.Trusted = append(f.Trusted, addr.WithZone(""))
	}
	slices.SortFunc(f.Trusted, netip.Addr.Compare)
	f.Trusted = slices.Compact(f.Trusted)
	return f, nil
}

// Links returns the links the agent must watch - defaults plus every
// interface a follower names - each with the loosest policy of the
// DynamicPrefixes following it: only global unicast prefixes unless one turned
// the filter off, the routers any of them trusts (every router if one trusts
// all), the widest length bounds. The writer applies each DynamicPrefix's own
// filter and bounds again; trust only the agents can apply. A follower without
// an interface follows the defaults.
func Links(defaults []string, followers []Follower) map[string]policy.Policy {
	out := map[string]policy.Policy{}
	followed := map[string]bool{}
	for _, l := range defaults {
		out[l] = policy.Policy{GlobalOnly: true}
	}
	// Router Advertisement followers first: a DHCPv6-PD follower on the same
	// link adds its delegations without loosening whom the link trusts.
	ordered := slices.Concat(
		slices.DeleteFunc(slices.Clone(followers), func(f Follower) bool { return f.Delegated }),
		slices.DeleteFunc(slices.Clone(followers), func(f Follower) bool { return !f.Delegated }))
	for _, f := range ordered {
		targets := defaults
		if f.Interface != "" {
			targets = []string{f.Interface}
		}
		for _, l := range targets {
			p := out[l]
			if !followed[l] {
				followed[l] = true
				out[l] = policy.Policy{GlobalOnly: f.GlobalOnly, Trusted: f.Trusted, MinLength: f.MinLength, MaxLength: f.MaxLength,
					Delegated: f.Delegated, FollowDeprecated: f.FollowDeprecated}
				continue
			}
			p.GlobalOnly = p.GlobalOnly && f.GlobalOnly
			p.Delegated = p.Delegated || f.Delegated
			p.FollowDeprecated = p.FollowDeprecated || f.FollowDeprecated
			switch {
			case f.Delegated: // trust is the RA followers' business
			case p.Trusted == nil || f.Trusted == nil:
				p.Trusted = nil
			default:
				p.Trusted = slices.Compact(slices.SortedFunc(slices.Values(slices.Concat(p.Trusted, f.Trusted)), netip.Addr.Compare))
			}
			p.MinLength, p.MaxLength = loosest(p.MinLength, f.MinLength, true), loosest(p.MaxLength, f.MaxLength, false)
			out[l] = p
		}
	}
	return out
}

// loosest of two bounds, 0 being none: the smaller of two minimums, the
// larger of two maximums.
func loosest(a, b int, minimum bool) int {
	switch {
	case a == 0 || b == 0:
		return 0
	case minimum:
		return min(a, b)
	default:
		return max(a, b)
	}
}

// Watch calls follow with what every DynamicPrefix asks of the agents, and
// clients with the DHCPv6 clients this node must run, after the first list
// and whenever either changes (other status updates and fields do not call
// them). One that cannot be read is logged and left out. synced is closed
// after the first calls.
func Watch(ctx context.Context, api *kubehttp.Client, log *slog.Logger, node string, follow func([]Follower), clients func([]dhcp6.Want)) (synced <-chan struct{}) {
	var last []Follower
	var lastClients []dhcp6.Want
	first := true
	return api.Watch(ctx, kubehttp.Collection{Path: "/apis/dynamic-prefix.io/v1alpha1/dynamicprefixes"}, log, func(objs kubehttp.Objects) {
		var fs []Follower
		var cs []dhcp6.Want
		for _, name := range slices.Sorted(maps.Keys(objs)) {
			f, err := Decode(objs[name])
			if err != nil {
				log.Warn("ignoring DynamicPrefix", "name", name, "err", err)
				continue
			}
			fs = append(fs, f...)
			if c, ok := Client(objs[name], node); ok {
				cs = append(cs, c)
			}
		}
		if first || !slices.EqualFunc(fs, last, Follower.Equal) {
			last = fs
			follow(fs)
		}
		if first || !slices.Equal(cs, lastClients) {
			lastClients = cs
			clients(cs)
		}
		first = false
	})
}
