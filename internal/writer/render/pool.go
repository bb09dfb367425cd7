// PoolEntries and Merge render the entries of a pool that follows a DynamicPrefix: the
// entries the spec asks for (one per pooled prefix), merged with the entries the
// user put there, which are never removed or rewritten. An ownership record
// (what was written last) tells the two apart; nothing is guessed from the shape
// of an address.

package render

import (
	"fmt"

	"github.com/renumber/renumber/internal/dynamicprefix"

	"net/netip"
	"slices"
	"strings"

	"github.com/renumber/renumber/internal/writer/api"
)

// PoolFollow is what a pool's annotations ask for.
type PoolFollow struct {
	DynamicPrefix string
	AddressRange  string // dynamic-prefix.io/address-range
	Subnet        string // dynamic-prefix.io/subnet
	// Suffix, when set, makes each entry one address: the suffix on each
	// pooled prefix, inside AddressRange or Subnet when one is named, as a
	// Service's address is (ServiceAddress; a Gateway's spec.addresses).
	Suffix string
}

// Form is the shape of entries a pool can hold.
type Form uint8

const (
	// Any: CIDRs and "first-last" ranges.
	Any Form = iota
	// CIDRs only (CIDR groups, kube-vip's cidr-* keys): a range becomes its
	// smallest covering CIDR.
	CIDRs
	// Ranges only (kube-vip's range-* keys): a CIDR becomes "first-last".
	Ranges
)

// PoolEntries returns the managed entries, in form, for the pooled prefixes,
// current first. Errors wrap api.ErrInvalid.
func PoolEntries(m api.Model, f PoolFollow, pooled []netip.Prefix, form Form) ([]string, error) {
	var out []string
	for _, p := range pooled {
		e, err := entry(m, f, p, form)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

func entry(m api.Model, f PoolFollow, p netip.Prefix, form Form) (string, error) {
	switch {
	case f.Suffix != "":
		a, err := ServiceAddress(m, ServiceFollow{Suffix: f.Suffix, Range: f.AddressRange, Subnet: f.Subnet}, p)
		if err != nil {
			return "", err
		}
		return a.String(), nil
	case f.AddressRange != "" && f.Subnet != "":
		return "", fmt.Errorf("%w: both %s and %s are set", api.ErrInvalid, dynamicprefix.AnnotationAddressRange, dynamicprefix.AnnotationSubnet)
	case f.AddressRange != "":
		first, last, err := m.Range(f.AddressRange, p)
		if err != nil {
			return "", err
		}
		if form == CIDRs {
			c, err := api.Covering(first, last)
			if err != nil {
				return "", fmt.Errorf("%w: %w", api.ErrInvalid, err)
			}
			return c.String(), nil
		}
		return first.String() + "-" + last.String(), nil
	case f.Subnet != "":
		sub, err := m.Subnet(f.Subnet, p)
		if err != nil {
			return "", err
		}
		return cidr(sub, form), nil
	default:
		return cidr(p.Masked(), form), nil
	}
}

// cidr writes p as a CIDR, or as "first-last" for a pool of Ranges.
func cidr(p netip.Prefix, form Form) string {
	if form != Ranges {
		return p.String()
	}
	first, last := api.Bounds(p)
	return first.String() + "-" + last.String()
}

// Canonical returns the comparison form of an entry ("cidr", "first-last", or
// "first-" for a Cilium block without stop); entries that do not parse
// compare as themselves.
func Canonical(e string) string {
	e = strings.TrimSpace(e)
	if first, last, ok := strings.Cut(e, "-"); ok {
		a, err1 := netip.ParseAddr(strings.TrimSpace(first))
		if err1 == nil && strings.TrimSpace(last) == "" {
			return a.String() + "-"
		}
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
