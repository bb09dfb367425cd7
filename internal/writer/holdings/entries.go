// Entries compared and merged: the canonical form of an entry, the user's
// entries kept beside ours (Merge), and what an object holds of ours without
// a record (Common, Geometric).
//
// Which entries are ours is read by spelling, not by value: an entry is ours
// only as the record spells it (or, without a record, as the object spells
// it). The admission policies that keep records true compare strings (the
// oldest Kubernetes supported has no IP library in CEL), so the writer reads
// ownership as they do: 2001:DB8::5 beside a record naming 2001:db8::5 is
// the user's, never taken out on that record's word (red team r8, F1).
// Whether a write is needed at all is still asked by value (SameSet, Holds).

package holdings

import (
	"net/netip"
	"slices"
	"strings"
)

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

// Merge keeps every live entry the record does not name in its exact
// spelling (the user's, verbatim and in order) and appends the desired
// managed entries. The new record lists exactly the managed entries written,
// spelled as written; one the user also lists, in any spelling, is the
// user's and is not written again.
func Merge(live, record, desired []string) (entries, newRecord []string) {
	owned := map[string]bool{}
	for _, r := range record {
		owned[strings.TrimSpace(r)] = true
	}
	present := map[string]bool{}
	for _, e := range live {
		if !owned[strings.TrimSpace(e)] {
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
		newRecord = append(newRecord, d)
	}
	return entries, newRecord
}

// Geometric is the existing operator's rule for an object that has no record
// (it last wrote it before records existed): an IPv6 entry is its own when it
// lies inside one of managed (the DynamicPrefix's current and history
// prefixes) - a CIDR as a subnet of one, a range with both ends inside the
// same one, an address inside one. A supernet of a managed prefix (a user
// pinning the whole delegation), IPv4 and anything that does not parse stay
// the user's. It returns the entries claimed, spelled as live spells them.
func Geometric(live []string, managed []netip.Prefix) []string {
	var out []string
	for _, e := range live {
		e = strings.TrimSpace(e)
		if inside(Canonical(e), managed) && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// Common lists the entries of live that desired holds too (compared by
// value), spelled as live spells them.
func Common(live, desired []string) []string {
	var out []string
	for _, e := range live {
		e = strings.TrimSpace(e)
		c := Canonical(e)
		if slices.ContainsFunc(desired, func(d string) bool { return Canonical(d) == c }) && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

func inside(e string, managed []netip.Prefix) bool {
	within := func(a, b netip.Addr) bool {
		for _, m := range managed {
			if a.Is6() && m.Contains(a) && m.Contains(b) {
				return true
			}
		}
		return false
	}
	if first, last, ok := strings.Cut(e, "-"); ok {
		a, err := netip.ParseAddr(first)
		if err != nil {
			return false
		}
		b := a
		if last != "" {
			if b, err = netip.ParseAddr(last); err != nil {
				return false
			}
		}
		return within(a, b)
	}
	if p, err := netip.ParsePrefix(e); err == nil {
		for _, m := range managed {
			if p.Addr().Is6() && p.Bits() >= m.Bits() && m.Contains(p.Addr()) {
				return true
			}
		}
		return false
	}
	a, err := netip.ParseAddr(e)
	return err == nil && within(a, a)
}

// SameSet reports whether two entry lists hold the same entries in canonical
// form, in any order: pools and Services do not care about order, so entries
// written in another order (the existing operator lists draining prefixes
// oldest first) are no reason to write.
func SameSet(a, b []string) bool {
	ca, cb := canonicalSet(a), canonicalSet(b)
	return slices.Equal(ca, cb)
}

// Holds reports whether live already holds entries, with record the managed
// ones among them: the same set (order aside), the current entry first of ours.
func Holds(live, entries, record []string) bool {
	return SameSet(entries, live) && Leads(live, record)
}

// Leads reports whether record's first entry (the current prefix's: PoolEntries
// lists it first) is the first of ours in live. Draining prefixes may stand in
// any order, the existing operator lists them oldest first, but a prefix that
// becomes current again moves to the front, so every pool reads current first.
func Leads(live, record []string) bool {
	if len(record) == 0 {
		return true
	}
	ours := map[string]bool{}
	for _, r := range record {
		ours[Canonical(r)] = true
	}
	for _, e := range live {
		if c := Canonical(e); ours[c] {
			return c == Canonical(record[0])
		}
	}
	return false
}

func canonicalSet(v []string) []string {
	out := make([]string, 0, len(v))
	for _, e := range v {
		out = append(out, Canonical(e))
	}
	slices.Sort(out)
	return slices.Compact(out)
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
