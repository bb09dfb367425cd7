// Gateway API Gateways (gateway.networking.k8s.io/v1) follow as HA Services
// do: a Gateway annotated dynamic-prefix.io/name and dynamic-prefix.io/suffix
// (optionally service-address-range or service-subnet) holds in spec.addresses
// one IPAddress per pooled prefix - the current one, then those draining -
// beside the user's entries (IPv4 addresses, hostnames, named addresses),
// which are never touched. The Gateway is its owner's object: the Service a
// Gateway controller generates from it is that controller's, and is never
// written.
//
// Two more places carry the addresses, for what reads them:
//   - spec.infrastructure.annotations[lbipam.cilium.io/ips]: controllers copy
//     the infrastructure annotations onto the Service they generate, where
//     Cilium's LB-IPAM reads them. It holds every IPAddress of spec.addresses
//     (the user's too) and the user's own entries there: on that Service it
//     is read before the key Cilium's own Gateway controller fills from
//     spec.addresses, so an address missing from it would be lost.
//   - the DNS target annotations (both external-dns spellings,
//     holdings.DefaultTargetKeys), which external-dns's gateway sources read
//     on the Gateway: the current address alone, beside the user's targets
//     (none with dynamic-prefix.io/skip-external-dns-update).
//
// A Gateway is a tenant's object as a Service is, and shares a Service's
// rules (Kind.Claims): it follows only from a namespace the DynamicPrefix's
// spec.serviceNamespaces names, and no two Services or Gateways get one
// address - the one that holds it keeps it, else the one created first.
//
// The record is dynamic-prefix.io/managed-ips, as on a Service: the
// addresses written. An address named there counts as held only where all
// three places hold it (Entries), so an edit that drops it from one is put
// back with the next pass, and a Gateway that holds it everywhere costs no
// write.

package backends

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/cilium/cilium/pkg/shortener"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// GatewayResource is the Gateway resource.
const GatewayResource = "gateways"

// GatewayGroup is the Gateway API's group.
const GatewayGroup = "gateway.networking.k8s.io"

// gatewayAddressType is the spec.addresses type the writer writes (and the
// one an entry without a type has).
const gatewayAddressType = "IPAddress"

// GatewayKinds returns the Gateway kind if the API server serves
// gateway.networking.k8s.io/v1 (the Gateway API's standard channel).
func GatewayKinds(disc Discovery) ([]*Kind, error) { return familyOf(GatewayGroup).discover(disc, nil) }

// GatewayKind is the Gateway kind in version v.
func GatewayKind(v string) *Kind {
	return &Kind{
		Name: "Gateway", Resource: GatewayResource, Namespaced: true,
		GVR:       schema.GroupVersionResource{Group: GatewayGroup, Version: v, Resource: GatewayResource},
		RecordKey: holdings.AnnotationManagedIPs, ClaimExact: true, Claims: true,
		FollowOf: gatewayFollow,
		Keys: slices.Concat([]string{holdings.AnnotationSuffix, holdings.AnnotationRange, holdings.AnnotationSubnet, holdings.AnnotationSkipDNS},
			holdings.DefaultTargetKeys),
		Entries:  func(u *unstructured.Unstructured, _ string) ([]string, error) { return gatewayEntries(u) },
		Place:    placeGateway,
		Annotate: gatewayTargets,
		Kept:     keptGateway,
		// Its Gateway controller publishes the addresses it serves in
		// status.addresses; the claims weigh them as held.
		Published:  gatewayPublished,
		KeptStatus: keptGatewayStatus,
		Generated:  ciliumGatewayService,
	}
}

// ciliumGatewayService is the Service Cilium's Gateway controller
// generates for the Gateway ns/name, of type LoadBalancer: LB-IPAM grants
// it what the Gateway's spec.addresses ask for (the infrastructure
// annotations copied onto it), and the controller echoes its ingress in the
// Gateway's status.addresses. Its name is cilium-gateway-<name>, shortened
// past 63 characters with the function Cilium's gateway-api translation
// names it with (a Gateway's name may be 253).
func ciliumGatewayService(ns, name string) string {
	return ns + "/" + shortener.ShortenK8sResourceName("cilium-gateway-"+name)
}

// gatewayFollow reads a Gateway's annotations, the keys an HA Service takes.
func gatewayFollow(u *unstructured.Unstructured) holdings.PoolFollow {
	f := holdings.ServiceFollowOf(u.GetAnnotations())
	return holdings.PoolFollow{DynamicPrefix: f.DynamicPrefix, Suffix: f.Suffix, AddressRange: f.Range, Subnet: f.Subnet}
}

// gatewayAddresses is spec.addresses as it is, and its IPAddress values.
func gatewayAddresses(u *unstructured.Unstructured) (all []any, ips []string, err error) {
	raw, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "addresses")
	if err != nil || !found || raw == nil {
		return nil, nil, err
	}
	all, ok := raw.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("spec.addresses is %T, not a list", raw)
	}
	for i, a := range all {
		m, ok := a.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("spec.addresses[%d] is %T, not an address", i, a)
		}
		if v, ok := ipValue(m); ok {
			ips = append(ips, v)
		}
	}
	return all, ips, nil
}

// ipValue is the value of an address of type IPAddress.
func ipValue(m map[string]any) (string, bool) {
	t, _ := m["type"].(string)
	v, ok := m["value"].(string)
	return v, ok && (t == "" || t == gatewayAddressType)
}

// infraAnnotation is spec.infrastructure.annotations[lbipam.cilium.io/ips].
func infraAnnotation(u *unstructured.Unstructured) (string, bool) {
	v, found, _ := unstructured.NestedString(u.Object, "spec", "infrastructure", "annotations", holdings.AnnotationIPs)
	return v, found
}

// gatewayEntries are the Gateway's IPAddress values. Those its record names
// are left out unless the infrastructure annotation and the DNS targets agree
// with spec.addresses: a pass then sees them missing and writes all three.
// An entry is the writer's only as its record spells it, as
// renumber-writer-gateways compares (red team r8 F1; s30-spelling): a
// respelled copy of an address - the user's, or a stolen token's beside
// the user's - is another entry, so the writer never takes out the user's
// with a copy the token recorded.
func gatewayEntries(u *unstructured.Unstructured) ([]string, error) {
	_, ips, err := gatewayAddresses(u)
	if err != nil {
		return nil, err
	}
	ann := u.GetAnnotations()
	rec, present := ann[holdings.AnnotationManagedIPs]
	record := holdings.ReadRecord(rec, present, holdings.Listed).Entries
	if len(record) == 0 || gatewayAgrees(u, ips, record) {
		return ips, nil
	}
	return slices.DeleteFunc(ips, func(e string) bool { return slices.Contains(record, e) }), nil
}

// gatewayAgrees reports whether the infrastructure annotation holds every
// IPAddress of spec.addresses, and each DNS target key the record's lead (the
// current address) alone of the record's - or none with skip-external-dns-update.
func gatewayAgrees(u *unstructured.Unstructured, ips, record []string) bool {
	infra, _ := infraAnnotation(u)
	have := holdings.Split(infra)
	for _, e := range ips {
		if !slices.Contains(have, e) {
			return false
		}
	}
	skip := u.GetAnnotations()[holdings.AnnotationSkipDNS] == "true"
	for _, key := range holdings.DefaultTargetKeys {
		var ours []string
		for _, t := range holdings.Split(u.GetAnnotations()[key]) {
			if slices.Contains(record, t) {
				ours = append(ours, t)
			}
		}
		if want := record[:1]; skip && len(ours) > 0 || !skip && !slices.Equal(ours, want) {
			return false
		}
	}
	return true
}

// placeGateway renders spec.addresses and the infrastructure annotation of the
// live Gateway: the entries owned before (as spelled) go, record's come
// after the user's.
func placeGateway(live *unstructured.Unstructured, owned, record []string, _ bool) (map[string]any, error) {
	all, _, err := gatewayAddresses(live)
	if err != nil {
		return nil, err
	}
	var addresses []any
	var ips []string
	for _, a := range all {
		v, ip := ipValue(a.(map[string]any))
		if ip && slices.Contains(owned, v) {
			continue
		}
		addresses = append(addresses, a)
		if ip {
			ips = append(ips, v)
		}
	}
	for _, r := range record {
		if !slices.Contains(ips, r) {
			addresses = append(addresses, map[string]any{"type": gatewayAddressType, "value": r})
			ips = append(ips, r)
		}
	}
	infra, _ := infraAnnotation(live)
	kept := withoutOwned(holdings.Split(infra), owned)
	for _, e := range ips {
		if !slices.Contains(kept, e) {
			kept = append(kept, e)
		}
	}
	spec := map[string]any{"addresses": nil, "infrastructure": map[string]any{"annotations": map[string]any{holdings.AnnotationIPs: joinedOrNil(kept)}}}
	if len(addresses) > 0 {
		spec["addresses"] = addresses
	}
	return spec, nil
}

// gatewayTargets renders the DNS target annotations: the user's targets, then
// the record's lead unless released or skipped.
func gatewayTargets(live *unstructured.Unstructured, owned, record []string, release bool) map[string]any {
	ann := live.GetAnnotations()
	out := map[string]any{}
	for _, key := range holdings.DefaultTargetKeys {
		v, had := ann[key]
		kept := withoutOwned(holdings.Split(v), owned)
		if !release && ann[holdings.AnnotationSkipDNS] != "true" && len(record) > 0 && !slices.Contains(kept, record[0]) {
			kept = append(kept, record[0])
		}
		if had || len(kept) > 0 {
			out[key] = joinedOrNil(kept)
		}
	}
	return out
}

// keptGateway is what the cache keeps of a Gateway's spec: its addresses and
// the infrastructure annotation (listeners and the rest are read from the
// live object when it is written).
func keptGateway(u *unstructured.Unstructured) any {
	spec := map[string]any{}
	if a, found, _ := unstructured.NestedFieldCopy(u.Object, "spec", "addresses"); found {
		spec["addresses"] = a
	}
	if v, found := infraAnnotation(u); found {
		spec["infrastructure"] = map[string]any{"annotations": map[string]any{holdings.AnnotationIPs: v}}
	}
	return spec
}

// gatewayPublished is the IPAddress values of the Gateway's status.addresses,
// written by its Gateway controller (as the cache keeps them, also the
// prefixes holdings.BoundedIn summarises the rest by).
func gatewayPublished(u *unstructured.Unstructured) []string {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
	var out []string
	for _, a := range list {
		if m, ok := a.(map[string]any); ok {
			if v, ok := ipValue(m); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// keptGatewayStatus is what the cache keeps of a Gateway's status: the
// IPAddress values of status.addresses (gatewayPublished), bounded in space
// as a Service's status.loadBalancer.ingress (holdings.BoundedIn: past
// holdings.MaxKeptPublished only the prefixes of those in space, kept as
// prefix values), nil if none.
func keptGatewayStatus(u *unstructured.Unstructured, space []netip.Prefix) any {
	var kept []any
	whole, more := holdings.BoundedIn(gatewayPublished(u), space)
	for _, v := range whole {
		kept = append(kept, map[string]any{"type": gatewayAddressType, "value": v})
	}
	for _, p := range more {
		kept = append(kept, map[string]any{"type": gatewayAddressType, "value": p.String()})
	}
	if kept == nil {
		return nil
	}
	return map[string]any{"addresses": kept}
}

// withoutOwned is v without the entries owned names (as spelled).
func withoutOwned(v, owned []string) []string {
	return slices.DeleteFunc(slices.Clone(v), func(e string) bool { return slices.Contains(owned, e) })
}

// joinedOrNil is v comma-separated, or nil (a merge patch's removal) when empty.
func joinedOrNil(v []string) any {
	if len(v) == 0 {
		return nil
	}
	return strings.Join(v, ",")
}
