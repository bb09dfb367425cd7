// service.go renders the addresses of Services that follow a DynamicPrefix
// in transition mode "ha": `lbipam.cilium.io/ips` gets the current and retained
// addresses (so connections on the old prefix keep working while it drains) and
// the external-dns target keys only the current one, once the load balancer
// publishes it in the Service's status (so a name never resolves to an address
// that does not answer yet).
// User entries are kept; ownership records say which entries, and under which
// target keys, are ours.

package render

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

// ServiceAddress is the Service's address on prefix p: the static suffix spliced onto
// the prefix (with a service address range, the result must lie inside that
// range), or onto the named subnet. Errors wrap model.ErrInvalid.
func ServiceAddress(m model.Model, f holdings.ServiceFollow, p netip.Prefix) (netip.Addr, error) {
	if f.Suffix == "" {
		return netip.Addr{}, fmt.Errorf("%w: %s is required", model.ErrInvalid, holdings.AnnotationSuffix)
	}
	suffix, err := netip.ParseAddr(f.Suffix)
	if err != nil || !suffix.Is6() {
		return netip.Addr{}, fmt.Errorf("%w: %s %q is not an IPv6 suffix", model.ErrInvalid, holdings.AnnotationSuffix, f.Suffix)
	}
	base := p
	switch {
	case f.Range != "" && f.Subnet != "":
		return netip.Addr{}, fmt.Errorf("%w: both %s and %s are set", model.ErrInvalid, holdings.AnnotationRange, holdings.AnnotationSubnet)
	case f.Range != "":
		first, last, err := m.Range(f.Range, p)
		if err != nil {
			return netip.Addr{}, err
		}
		a, err := model.Splice(m.Delegation(p), suffix) // ranges lie in the delegation
		if err != nil || a.Less(first) || last.Less(a) {
			return netip.Addr{}, fmt.Errorf("%w: suffix %s is outside address range %q", model.ErrInvalid, f.Suffix, f.Range)
		}
		return a, nil
	case f.Subnet != "":
		if base, err = m.Subnet(f.Subnet, p); err != nil {
			return netip.Addr{}, err
		}
	}
	a, err := model.Splice(base, suffix)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: %w", model.ErrInvalid, err)
	}
	return a, nil
}

// ServiceOptions are the writer's settings for every HA Service.
type ServiceOptions struct {
	// TargetKeys: the target goes under every key, in order.
	TargetKeys []string
	// Managed are the prefixes whose addresses a Service without records
	// is taken to hold as ours (decide.Decision.Managed: the existing
	// operator's geometric rule).
	Managed []netip.Prefix
	// L2Nudge: the running Cilium's L2 announcer misses an address added to
	// an existing Service (before v1.20.1, cilium/cilium PR 47579), so each
	// Service whose load balancer has published a new address of ours is
	// touched once more (Nudged).
	L2Nudge bool
	// Withheld are addresses of the Service's left out of what it is
	// written (the claims': on a draining prefix, published for another).
	Withheld []string
}

// Service merges the managed addresses for the pooled prefixes (current first)
// with what the Service carries now. served is what the load balancers
// publish: the target moves to the current address only once the Service's
// status.loadBalancer.ingress publishes it (Held), never onto one published
// for another object only (target), and the nudge follows it.
func Service(m model.Model, f holdings.ServiceFollow, pooled []netip.Prefix, live holdings.Annotations, served Served, o ServiceOptions) (holdings.Annotations, error) {
	ingress := served.Ingress
	if f.Mapping != "" {
		return renderMapped(m, f, pooled, live, ingress, o)
	}
	key, err := f.AddressKey()
	if err != nil {
		return holdings.Annotations{}, err
	}
	var addrs []string
	for _, p := range pooled {
		a, err := ServiceAddress(m, f, p)
		if err != nil {
			return holdings.Annotations{}, err
		}
		if !slices.Contains(addrs, a.String()) {
			addrs = append(addrs, a.String())
		}
	}
	live = geometric(live, o.Managed)
	live.ManagedIPs = append(live.ManagedIPs, left(m, f, pooled, o.Managed, live)...)
	var out holdings.Annotations
	out.IPs, out.ManagedIPs = addresses(live, key, slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return slices.Contains(o.Withheld, a) }))
	if key != holdings.AnnotationIPs && len(out.ManagedIPs) > 0 {
		out.IPsKey = key
	}
	var current []string
	if len(addrs) > 0 && !f.SkipDNS {
		current = target(live, addrs, served)
	}
	out.Targets, out.ManagedTargets, out.TargetKeys = targets(live, o.TargetKeys, current)
	out.L2Nudged = live.L2Nudged
	if f.ForceL2Nudge || (o.L2Nudge && !f.SkipL2Nudge && key == holdings.AnnotationIPs) {
		out.L2Nudged = Nudged(live.L2Nudged, out.ManagedIPs, ingress)
	}
	return recorded(out, live), nil
}

// Mapping is one address the load balancer publishes and the address the
// router maps it to, from prefix From onto To.
type Mapping struct {
	Inside, Outside netip.Addr
	From, To        netip.Prefix
}

// Mapped returns what the router maps each address of ingress inside the
// Service's mapping prefix to, under current (or its delegation, when that
// is the mapping prefix's length). Errors wrap model.ErrInvalid.
func Mapped(m model.Model, f holdings.ServiceFollow, current netip.Prefix, ingress []string) ([]Mapping, error) {
	inside, err := mappingPrefix(f)
	if err != nil {
		return nil, err
	}
	outside := current
	if d := m.Delegation(current); d.Bits() == inside.Bits() {
		outside = d
	}
	if outside.Bits() != inside.Bits() {
		return nil, fmt.Errorf("%w: %s %s is a /%d; the router maps it onto the followed prefix %s (or its delegation), a /%d",
			model.ErrInvalid, holdings.AnnotationMappingPrefix, inside, inside.Bits(), outside, outside.Bits())
	}
	var out []Mapping
	for _, in := range ingress {
		a, err := netip.ParseAddr(in)
		if err != nil || !inside.Contains(a) {
			continue
		}
		t, err := model.Map(f.Mapping, a, inside, outside)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", model.ErrInvalid, err)
		}
		out = append(out, Mapping{Inside: a, Outside: t, From: inside, To: outside})
	}
	return out, nil
}

// mappingPrefix reads what f asks for under AnnotationMappingPrefix.
func mappingPrefix(f holdings.ServiceFollow) (netip.Prefix, error) {
	inside, err := netip.ParsePrefix(f.MappingPrefix)
	if err != nil || !inside.Addr().Is6() || inside.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%w: %s %q is not an IPv6 prefix", model.ErrInvalid, holdings.AnnotationMappingPrefix, f.MappingPrefix)
	}
	return inside.Masked(), nil
}

// renderMapped is Service for one whose address stays (a ULA
// its router maps onto the followed prefix): the DNS target is each address
// the load balancer publishes inside the mapping prefix, mapped onto the
// current prefix - or onto its delegation, when that is the mapping
// prefix's length. While it publishes none, the target stays as it is (it
// is never withdrawn for a load balancer's restart). Addresses of ours from
// an earlier mode are released; the user's entries stay everywhere.
func renderMapped(m model.Model, f holdings.ServiceFollow, pooled []netip.Prefix, live holdings.Annotations, ingress []string, o ServiceOptions) (holdings.Annotations, error) {
	if f.Mapping != model.MappingNPTv6 && f.Mapping != model.MappingNetmap {
		return holdings.Annotations{}, fmt.Errorf("%w: %s %q: want %s or %s", model.ErrInvalid, holdings.AnnotationMapping, f.Mapping, model.MappingNPTv6, model.MappingNetmap)
	}
	if _, err := mappingPrefix(f); err != nil {
		return holdings.Annotations{}, err
	}
	var current []string
	if len(pooled) > 0 && !f.SkipDNS {
		mapped, err := Mapped(m, f, pooled[0], ingress)
		if err != nil {
			return holdings.Annotations{}, err
		}
		for _, mp := range mapped {
			if !slices.Contains(current, mp.Outside.String()) {
				current = append(current, mp.Outside.String())
			}
		}
		if len(current) == 0 {
			current = live.ManagedTargets // nothing published yet: the target stays
		}
	}
	var out holdings.Annotations
	out.IPs, _ = addresses(live, "", nil)
	out.Targets, out.ManagedTargets, out.TargetKeys = targets(live, o.TargetKeys, current)
	out.L2Nudged = live.L2Nudged
	return recorded(out, live), nil
}

// recorded sets which records the Service carries once a is written: one
// that has entries, and an address or target record live carries, emptied
// rather than removed (an absent record would hand the user's entries to
// the existing operator's geometric rule; renumber-writer-services refuses
// its removal from a Service that follows a DynamicPrefix). Release passes
// no live: its records go.
func recorded(a, live holdings.Annotations) holdings.Annotations {
	a.IPsRecorded = len(a.ManagedIPs) > 0 || live.IPsRecorded
	a.TargetsRecorded = len(a.ManagedTargets) > 0 || live.TargetsRecorded
	a.KeysRecorded = len(a.TargetKeys) > 0
	return a
}

// geometric applies the existing operator's rule to what a Service without
// records holds: its addresses and targets inside managed are its own.
// A Service carrying any record was written by a version that writes them,
// so there an absent record owns nothing.
func geometric(live holdings.Annotations, managed []netip.Prefix) holdings.Annotations {
	if live.IPsRecorded || live.TargetsRecorded || live.KeysRecorded || live.Owned() {
		return live
	}
	live.ManagedIPs = holdings.Geometric(live.IPs[holdings.AnnotationIPs], managed)
	live.ManagedTargets = holdings.Geometric(live.Targets[holdings.AnnotationTargetAlpha], managed)
	if len(live.ManagedTargets) > 0 {
		live.TargetKeys = []string{holdings.AnnotationTargetAlpha}
	}
	return live
}

// left are the Service's own addresses on the prefixes of managed that are
// no longer pooled, where the Service still carries them: the writer put
// them there whatever its record says (a record the writer's token could
// forge, emptied or naming the user's entries, would otherwise leave the
// expired prefix's address on the Service for good). Only the exact address
// the Service follows on such a prefix is claimed, and only as the writer
// spells it (holdings.Merge): never the user's others, nor a respelling.
func left(m model.Model, f holdings.ServiceFollow, pooled, managed []netip.Prefix, live holdings.Annotations) []string {
	var out []string
	for _, p := range managed {
		if slices.Contains(pooled, p) {
			continue
		}
		a, err := ServiceAddress(m, f, p)
		if err != nil {
			continue
		}
		for _, k := range holdings.AddressKeys {
			if slices.Contains(live.IPs[k], a.String()) &&
				!slices.Contains(out, a.String()) && !slices.Contains(live.ManagedIPs, a.String()) {
				out = append(out, a.String())
			}
		}
	}
	return out
}

// addresses puts addrs under key, and takes ours out of every address key
// (a Service that changed provider): the record names what we own under
// each of them, not only under the key it was written for (a record key the
// writer's token could forge would otherwise disown our addresses, and they
// would stay as the user's). The user's entries stay everywhere.
func addresses(live holdings.Annotations, key string, addrs []string) (map[string][]string, []string) {
	out := map[string][]string{}
	var record []string
	for _, k := range holdings.AddressKeys {
		owned, want := live.ManagedIPs, []string(nil)
		if k == key {
			want = addrs
		}
		entries, rec := holdings.Merge(live.IPs[k], owned, want)
		if len(entries) > 0 {
			out[k] = entries
		}
		if k == key {
			record = rec
		}
	}
	return out, record
}

// Nudged returns the nudge record after the load balancer published ingress:
// when it publishes an address of ours the last nudge did not cover, a new
// record (the managed addresses it publishes) - the one write Cilium's L2
// announcer needs to see the address; otherwise the last record, so a
// published address going away (a drain ending) costs nothing.
func Nudged(last, managed, ingress []string) []string {
	var published []string
	for _, a := range managed {
		if slices.Contains(ingress, a) {
			published = append(published, a)
		}
	}
	for _, a := range published {
		if !slices.Contains(last, a) {
			return published
		}
	}
	return last
}

// Held returns the targets DNS stays on while the load balancer has not yet
// published the current address (addrs[0]): those we wrote before that are
// still managed addresses and still published. nil when the target may move:
// the current address is published, the Service publishes no ingress at all
// (nothing to wait for), or no previous target of ours still answers.
func Held(live holdings.Annotations, addrs, ingress []string) []string {
	if len(ingress) == 0 || slices.Contains(ingress, addrs[0]) {
		return nil
	}
	var held []string
	for _, t := range live.ManagedTargets {
		if slices.Contains(addrs, t) && slices.Contains(ingress, t) {
			held = append(held, t)
		}
	}
	return held
}

// targets writes current under every key of keys and releases the keys the
// record names that keys no longer does. The record is what we own under
// every key: an entry the user also lists under one key is the user's under
// all (a user entry is never removed; the price, in that corner, is an entry
// of ours left behind).
func targets(live holdings.Annotations, keys, current []string) (map[string][]string, []string, []string) {
	out := map[string][]string{}
	var record []string
	for i, k := range keys {
		var owned []string
		if slices.Contains(live.TargetKeys, k) {
			owned = live.ManagedTargets
		}
		entries, rec := holdings.Merge(live.Targets[k], owned, current)
		if len(entries) > 0 {
			out[k] = entries
		}
		if i == 0 {
			record = rec
		} else {
			record = slices.DeleteFunc(record, func(e string) bool { return !slices.Contains(rec, e) })
		}
	}
	for _, k := range live.TargetKeys {
		if !slices.Contains(keys, k) {
			if entries, _ := holdings.Merge(live.Targets[k], live.ManagedTargets, nil); len(entries) > 0 {
				out[k] = entries
			}
		}
	}
	if len(record) == 0 {
		return out, nil, nil
	}
	return out, record, slices.Clone(keys)
}

// ReleaseService removes our entries and records, keeping the user's.
func ReleaseService(live holdings.Annotations) holdings.Annotations {
	var out holdings.Annotations
	out.IPs, _ = addresses(live, "", nil)
	out.Targets, out.ManagedTargets, out.TargetKeys = targets(live, nil, nil)
	return recorded(out, holdings.Annotations{})
}

// ReleaseFollowingService is ReleaseService of a Service that still follows
// a DynamicPrefix that lives (its namespace not let follow, its address
// another's, transition mode simple): its records are emptied, not removed.
// renumber-writer-values refuses their removal there - a Service without
// records is one the existing operator wrote, whose IPv6 entries inside the
// prefixes the writer's next pass would own, the user's among them.
func ReleaseFollowingService(live holdings.Annotations) holdings.Annotations {
	out := ReleaseService(live)
	out.IPsRecorded, out.TargetsRecorded = live.IPsRecorded, live.TargetsRecorded
	return out
}
