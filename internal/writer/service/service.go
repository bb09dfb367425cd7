// Package service renders the addresses of Services that follow a DynamicPrefix
// in transition mode "ha": `lbipam.cilium.io/ips` gets the current and retained
// addresses (so connections on the old prefix keep working while it drains) and
// `external-dns.alpha.kubernetes.io/target` only the current one (so DNS moves at
// once). User entries in both are kept; ownership records say which are ours.
package service

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/pool"
	"github.com/renumber/renumber/internal/writer/prefix"
	"github.com/renumber/renumber/internal/writer/spec"
)

// Annotations read and written on Services.
const (
	AnnotationSuffix        = "dynamic-prefix.io/suffix"
	AnnotationRange         = "dynamic-prefix.io/service-address-range"
	AnnotationSubnet        = "dynamic-prefix.io/service-subnet"
	AnnotationSkipDNS       = "dynamic-prefix.io/skip-external-dns-update"
	AnnotationIPs           = "lbipam.cilium.io/ips"
	AnnotationTarget        = "external-dns.alpha.kubernetes.io/target"
	AnnotationManagedIPs    = "dynamic-prefix.io/managed-ips"
	AnnotationManagedTarget = "dynamic-prefix.io/managed-targets"
)

// GVR is the Service resource.
var GVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// Follow is what a Service's annotations ask for.
type Follow struct {
	DynamicPrefix string
	Suffix        string
	Range         string
	Subnet        string
	SkipDNS       bool
}

// FollowOf reads a Service's annotations.
func FollowOf(ann map[string]string) Follow {
	return Follow{
		DynamicPrefix: ann[dynamicprefix.AnnotationName],
		Suffix:        ann[AnnotationSuffix],
		Range:         ann[AnnotationRange],
		Subnet:        ann[AnnotationSubnet],
		SkipDNS:       ann[AnnotationSkipDNS] == "true",
	}
}

// Address is the Service's address on prefix p: the static suffix spliced onto
// the prefix (with a service address range, the result must lie inside that
// range), or onto the named subnet. Errors wrap spec.ErrInvalid.
func Address(m spec.Model, f Follow, p netip.Prefix) (netip.Addr, error) {
	if f.Suffix == "" {
		return netip.Addr{}, fmt.Errorf("%w: %s is required", spec.ErrInvalid, AnnotationSuffix)
	}
	suffix, err := netip.ParseAddr(f.Suffix)
	if err != nil || !suffix.Is6() {
		return netip.Addr{}, fmt.Errorf("%w: %s %q is not an IPv6 suffix", spec.ErrInvalid, AnnotationSuffix, f.Suffix)
	}
	base := p
	switch {
	case f.Range != "" && f.Subnet != "":
		return netip.Addr{}, fmt.Errorf("%w: both %s and %s are set", spec.ErrInvalid, AnnotationRange, AnnotationSubnet)
	case f.Range != "":
		first, last, err := m.Range(f.Range, p)
		if err != nil {
			return netip.Addr{}, err
		}
		a, err := prefix.Splice(p, suffix)
		if err != nil || a.Less(first) || last.Less(a) {
			return netip.Addr{}, fmt.Errorf("%w: suffix %s is outside address range %q", spec.ErrInvalid, f.Suffix, f.Range)
		}
		return a, nil
	case f.Subnet != "":
		if base, err = m.Subnet(f.Subnet, p); err != nil {
			return netip.Addr{}, err
		}
	}
	a, err := prefix.Splice(base, suffix)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: %w", spec.ErrInvalid, err)
	}
	return a, nil
}

// Annotations are the four values a Service should carry; an empty list means
// the annotation is absent (an empty lbipam.cilium.io/ips would withdraw the
// Service's address, so none is ever written).
type Annotations struct {
	IPs, ManagedIPs, Targets, ManagedTargets []string
}

// Render merges the managed addresses for the pooled prefixes (current first)
// with what the Service carries now.
func Render(m spec.Model, f Follow, pooled []netip.Prefix, live Annotations) (Annotations, error) {
	var addrs []string
	for _, p := range pooled {
		a, err := Address(m, f, p)
		if err != nil {
			return Annotations{}, err
		}
		if !slices.Contains(addrs, a.String()) {
			addrs = append(addrs, a.String())
		}
	}
	var out Annotations
	out.IPs, out.ManagedIPs = pool.Merge(live.IPs, live.ManagedIPs, addrs)
	var current []string
	if len(addrs) > 0 && !f.SkipDNS {
		current = addrs[:1]
	}
	out.Targets, out.ManagedTargets = pool.Merge(live.Targets, live.ManagedTargets, current)
	return out, nil
}

// Release removes our entries and records, keeping the user's.
func Release(live Annotations) Annotations {
	var out Annotations
	out.IPs, _ = pool.Merge(live.IPs, live.ManagedIPs, nil)
	out.Targets, _ = pool.Merge(live.Targets, live.ManagedTargets, nil)
	return out
}

// Split reads a comma-separated annotation value, entries verbatim.
func Split(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
