// The ownership record: which of an object's entries are ours, spelled as
// the existing operator spells it, so each side reads what the other wrote.

package holdings

import (
	"net/netip"
	"slices"
	"strings"
	"unicode"
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
	// Entries are the entries it names, spelled as it spells them (a block
	// key as the block's entry: "cidr", "first-last" or "first-"): an entry
	// is ours only in that spelling (Merge).
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

// recordEntry is the entry a record item names, as the item spells it.
func recordEntry(item string, s Spelling) (string, bool) {
	if s == BlockKeys {
		if strings.ContainsFunc(item, unicode.IsSpace) { // no block's field holds a space
			return item, false
		}
		switch {
		case strings.HasPrefix(item, "cidr="):
			item = strings.TrimPrefix(item, "cidr=")
			_, err := netip.ParsePrefix(item)
			return item, err == nil
		case strings.HasPrefix(item, "range="):
			item = strings.TrimPrefix(item, "range=")
			if !strings.Contains(item, "-") {
				item += "-" // a block without stop
			}
		default: // a plain entry: a block's, a prefix or a range - no bare address
			if _, err := netip.ParseAddr(item); err == nil {
				return item, false
			}
		}
	}
	return item, parses(Canonical(item))
}

// parses reports whether a canonical entry is an address, a prefix or a range
// (of addresses without a zone: no pool or Service holds one).
func parses(e string) bool {
	if strings.Contains(e, "%") {
		return false
	}
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

// WriteRecord spells entries (as they are written) as a record value.
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
