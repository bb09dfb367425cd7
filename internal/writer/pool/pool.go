// Package pool renders the entries of a pool that follows a DynamicPrefix: the
// entries the spec asks for (one per pooled prefix), merged with the entries the
// user put there, which are never removed or rewritten. An ownership record
// (what was written last) tells the two apart; nothing is guessed from the shape
// of an address.
package pool

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/prefix"
)

// ErrSpec is wrapped by errors caused by the DynamicPrefix spec or the pool's
// annotations (a fix by the user heals them).
var ErrSpec = errors.New("pool: cannot render")

// Follow is what a pool's annotations ask for.
type Follow struct {
	DynamicPrefix string
	AddressRange  string // dynamic-prefix.io/address-range
	Subnet        string // dynamic-prefix.io/subnet
}

// Desired returns the managed entries for the pooled prefixes, current first. With
// cidrOnly (CIDR groups, Calico) a range becomes its smallest covering CIDR.
func Desired(spec dynamicprefix.Spec, f Follow, pooled []netip.Prefix, cidrOnly bool) ([]string, error) {
	var out []string
	for _, p := range pooled {
		e, err := entry(spec, f, p, cidrOnly)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

func entry(spec dynamicprefix.Spec, f Follow, p netip.Prefix, cidrOnly bool) (string, error) {
	switch {
	case f.AddressRange != "" && f.Subnet != "":
		return "", fmt.Errorf("%w: both %s and %s are set", ErrSpec, dynamicprefix.AnnotationAddressRange, dynamicprefix.AnnotationSubnet)
	case f.AddressRange != "":
		i := slices.IndexFunc(spec.AddressRanges, func(r dynamicprefix.AddressRange) bool { return r.Name == f.AddressRange })
		if i < 0 {
			return "", fmt.Errorf("%w: DynamicPrefix %q has no address range %q", ErrSpec, f.DynamicPrefix, f.AddressRange)
		}
		r := spec.AddressRanges[i]
		start, err1 := netip.ParseAddr(r.Start)
		end, err2 := netip.ParseAddr(r.End)
		if err := errors.Join(err1, err2); err != nil {
			return "", fmt.Errorf("%w: address range %q: %v", ErrSpec, r.Name, err)
		}
		first, last, err := prefix.Range(p, start, end)
		if err != nil {
			return "", fmt.Errorf("%w: address range %q on %s: %v", ErrSpec, r.Name, p, err)
		}
		if cidrOnly {
			c, err := prefix.Covering(first, last)
			if err != nil {
				return "", fmt.Errorf("%w: %v", ErrSpec, err)
			}
			return c.String(), nil
		}
		return first.String() + "-" + last.String(), nil
	case f.Subnet != "":
		i := slices.IndexFunc(spec.Subnets, func(s dynamicprefix.Subnet) bool { return s.Name == f.Subnet })
		if i < 0 {
			return "", fmt.Errorf("%w: DynamicPrefix %q has no subnet %q", ErrSpec, f.DynamicPrefix, f.Subnet)
		}
		s := spec.Subnets[i]
		sub, err := prefix.Subnet(p, s.Offset, s.PrefixLength)
		if err != nil {
			return "", fmt.Errorf("%w: subnet %q on %s: %v", ErrSpec, s.Name, p, err)
		}
		return sub.String(), nil
	default:
		return p.Masked().String(), nil
	}
}

// Canonical returns the comparison form of an entry ("cidr" or "first-last");
// entries that do not parse compare as themselves.
func Canonical(e string) string {
	e = strings.TrimSpace(e)
	if first, last, ok := strings.Cut(e, "-"); ok {
		a, err1 := netip.ParseAddr(strings.TrimSpace(first))
		b, err2 := netip.ParseAddr(strings.TrimSpace(last))
		if err1 == nil && err2 == nil {
			return a.String() + "-" + b.String()
		}
		return e
	}
	if p, err := netip.ParsePrefix(e); err == nil {
		return p.String()
	}
	if a, err := netip.ParseAddr(e); err == nil {
		return a.String()
	}
	return e
}

// ParseRecord reads an ownership record annotation.
func ParseRecord(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, Canonical(e))
		}
	}
	return out
}

// FormatRecord writes an ownership record annotation.
func FormatRecord(entries []string) string { return strings.Join(entries, ",") }

// Merge keeps every live entry the record does not claim (the user's, verbatim
// and in order) and appends the desired managed entries. The new record lists
// exactly the managed entries written; one the user also lists is the user's.
func Merge(live, record, desired []string) (entries, newRecord []string) {
	owned := map[string]bool{}
	for _, r := range record {
		owned[Canonical(r)] = true
	}
	present := map[string]bool{}
	for _, e := range live {
		if !owned[Canonical(e)] {
			entries = append(entries, e)
			present[Canonical(e)] = true
		}
	}
	for _, d := range desired {
		c := Canonical(d)
		if present[c] {
			continue
		}
		present[c] = true
		entries = append(entries, d)
		newRecord = append(newRecord, c)
	}
	return entries, newRecord
}

// Same reports whether two entry lists are equal in canonical form and order.
func Same(a, b []string) bool {
	return slices.EqualFunc(a, b, func(x, y string) bool { return Canonical(x) == Canonical(y) })
}
