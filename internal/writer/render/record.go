package render

import (
	"net/netip"
	"slices"
	"strings"
)

// Spelling is how a kind's ownership record spells the entries it lists.
// Records are written in the spelling the existing operator (dynamic-prefix.io,
// v0.0.10 and later) writes, so each side reads what the other wrote: a user
// switching to renumber, or back, keeps every record meaningful.
type Spelling uint8

const (
	// Listed: the entries themselves, comma-separated (CIDR groups, MetalLB,
	// kube-vip, Services).
	Listed Spelling = iota
	// BlockKeys: CiliumLoadBalancerIPPool blocks as keys, "cidr=<cidr>" for a
	// {cidr} block, "range=<start>-<stop>" for a {start, stop} block and
	// "range=<start>" for a block without stop. Entries spelled as plain
	// entries (what renumber wrote before it wrote keys) are read too.
	BlockKeys
)

// Record is an ownership record as read from an object.
type Record struct {
	// Entries are the entries it names, canonical.
	Entries []string
	// Present: the annotation exists. An absent record is an object written
	// before records existed (or never written); a present, empty one owns
	// nothing.
	Present bool
	// Unreadable are items that name no entry (neither an address, a prefix,
	// a range nor a block key): they can own nothing, and the writer says so
	// before a write drops them.
	Unreadable []string
}

// ReadRecord reads the record annotation value v (present: the annotation
// exists) spelled s.
func ReadRecord(v string, present bool, s Spelling) Record {
	r := Record{Present: present}
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		e, ok := recordEntry(item, s)
		if !ok {
			r.Unreadable = append(r.Unreadable, item)
			continue
		}
		if !slices.Contains(r.Entries, e) {
			r.Entries = append(r.Entries, e)
		}
	}
	return r
}

// recordEntry is the canonical entry a record item names.
func recordEntry(item string, s Spelling) (string, bool) {
	if s == BlockKeys {
		switch {
		case strings.HasPrefix(item, "cidr="):
			p, err := netip.ParsePrefix(strings.TrimPrefix(item, "cidr="))
			return p.String(), err == nil
		case strings.HasPrefix(item, "range="):
			r := strings.TrimPrefix(item, "range=")
			if !strings.Contains(r, "-") {
				r += "-" // a block without stop
			}
			item = r
		}
	}
	e := Canonical(item)
	return e, parses(e)
}

// parses reports whether a canonical entry is an address, a prefix or a range.
func parses(e string) bool {
	if first, last, ok := strings.Cut(e, "-"); ok {
		_, err1 := netip.ParseAddr(first)
		_, err2 := netip.ParseAddr(last)
		return err1 == nil && (err2 == nil || last == "")
	}
	if _, err := netip.ParsePrefix(e); err == nil {
		return true
	}
	_, err := netip.ParseAddr(e)
	return err == nil
}

// WriteRecord spells entries (canonical) as a record value.
func WriteRecord(entries []string, s Spelling) string {
	if s != BlockKeys {
		return strings.Join(entries, ",")
	}
	keys := make([]string, 0, len(entries))
	for _, e := range entries {
		if strings.Contains(e, "-") {
			keys = append(keys, "range="+strings.TrimSuffix(e, "-"))
		} else {
			keys = append(keys, "cidr="+e)
		}
	}
	return strings.Join(keys, ",")
}

// Geometric is the existing operator's rule for an object that has no record
// (it last wrote it before records existed): an IPv6 entry is its own when it
// lies inside one of managed (the DynamicPrefix's current and history
// prefixes) - a CIDR as a subnet of one, a range with both ends inside the
// same one, an address inside one. A supernet of a managed prefix (a user
// pinning the whole delegation), IPv4 and anything that does not parse stay
// the user's. It returns the entries claimed, canonical.
func Geometric(live []string, managed []netip.Prefix) []string {
	var out []string
	for _, e := range live {
		c := Canonical(e)
		if inside(c, managed) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// Common lists the entries of live that desired holds too, canonical.
func Common(live, desired []string) []string {
	var out []string
	for _, e := range live {
		c := Canonical(e)
		if slices.ContainsFunc(desired, func(d string) bool { return Canonical(d) == c }) && !slices.Contains(out, c) {
			out = append(out, c)
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
