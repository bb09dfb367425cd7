// Pool renders one write of a pool that follows a DynamicPrefix: the entries
// it asks for (PoolEntries: one per pooled prefix, current first, in the form
// the pool holds), merged with the user's.
// Which of a pool's entries are ours, and how the user's stay, is package
// holdings' (Merge and the ownership record); nothing is guessed from the
// shape of an address.

package render

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

// Pool is the one write that makes the pool h hold what the pooled
// prefixes ask for: the entries its follow asks for (PoolEntries), ours
// replaced by them and the user's kept (holdings.Held.Claim; exact and
// managed say what of a pool without a record is ours). An error is the
// pool's reference to a range or subnet that the spec cannot resolve.
func Pool(m model.Model, h holdings.Held, pooled, managed []netip.Prefix, exact bool) (holdings.Write, error) {
	desired, err := PoolEntries(m, h.Follow, pooled, h.Form)
	if err != nil {
		return holdings.Write{}, err
	}
	return h.Claim(desired, exact, managed), nil
}

// PoolEntries returns the managed entries, in form, for the pooled prefixes,
// current first. Errors wrap model.ErrInvalid.
func PoolEntries(m model.Model, f holdings.PoolFollow, pooled []netip.Prefix, form holdings.Form) ([]string, error) {
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

func entry(m model.Model, f holdings.PoolFollow, p netip.Prefix, form holdings.Form) (string, error) {
	switch {
	case f.Suffix != "":
		a, err := ServiceAddress(m, holdings.ServiceFollow{Suffix: f.Suffix, Range: f.AddressRange, Subnet: f.Subnet}, p)
		if err != nil {
			return "", err
		}
		return a.String(), nil
	case f.AddressRange != "" && f.Subnet != "":
		return "", fmt.Errorf("%w: both %s and %s are set", model.ErrInvalid, dynamicprefix.AnnotationAddressRange, dynamicprefix.AnnotationSubnet)
	case f.AddressRange != "":
		first, last, err := m.Range(f.AddressRange, p)
		if err != nil {
			return "", err
		}
		if form == holdings.CIDRs {
			c, err := model.Covering(first, last)
			if err != nil {
				return "", fmt.Errorf("%w: %w", model.ErrInvalid, err)
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
func cidr(p netip.Prefix, form holdings.Form) string {
	if form != holdings.Ranges {
		return p.String()
	}
	first, last := model.Bounds(p)
	return first.String() + "-" + last.String()
}
