// What a pool-like object asks for (PoolFollow), what it holds (Held: its
// entries, in their Form, and our record) and what one write makes it hold
// (Write): ours replaced, the user's kept (Merge), in one step.

package holdings

import "net/netip"

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

// Held is what a pool-like object asks for and holds, as read when it last
// changed (or as the writer last wrote it: After).
type Held struct {
	Follow  PoolFollow
	Form    Form // the form its entries take where they live
	Entries []string
	Record  Record
	// RecordValue is the record annotation as it reads, spelled Spelling
	// (the kind's: its record is rewritten in the same spelling).
	RecordValue string
	Spelling    Spelling
}

// Write is what one write makes a pool hold.
type Write struct {
	// Entries: the user's, verbatim and in order, then ours.
	Entries []string
	// Owned are ours before the write, Record ours after it: empty, not
	// nil, when we own nothing (a record present and empty); nil when the
	// record is removed (Release).
	Owned, Record []string
	// Value is Record spelled as the object's record is, when there is
	// something to write ("" when Record is nil, or when it Holds: a
	// steady pass spells nothing).
	Value string
	// Kept: the object holds Entries already (in any order, the current
	// entry first of ours); Holds: and its record names Record, so there
	// is nothing to write.
	Kept, Holds bool
}

// Claim is the write that replaces ours among h's entries by desired (the
// current entry first). Ours are what h's record names; an object without a
// record was last written before records existed: then only the entries
// equal to one of desired are ours (exact; Common), or, the existing
// operator's own rule, those inside a managed prefix (Geometric).
func (h Held) Claim(desired []string, exact bool, managed []netip.Prefix) Write {
	owned := h.Record.Entries
	switch {
	case h.Record.Present:
	case exact:
		owned = Common(h.Entries, desired)
	default:
		owned = Geometric(h.Entries, managed)
	}
	w := Write{Owned: owned}
	w.Entries, w.Record = Merge(h.Entries, owned, desired)
	if w.Record == nil {
		w.Record = []string{} // present and empty: we own nothing here
	}
	w.Kept = Holds(h.Entries, w.Entries, w.Record)
	w.Holds = w.Kept && h.Record.Present && SameSet(w.Record, h.Record.Entries)
	if !w.Holds {
		w.Value = WriteRecord(w.Record, h.Spelling)
	}
	return w
}

// Release is the write that takes ours out of h's entries and removes the
// record; the user's entries stay.
func (h Held) Release() Write {
	entries, _ := Merge(h.Entries, h.Record.Entries, nil)
	return Write{Entries: entries, Owned: h.Record.Entries, Kept: Holds(h.Entries, entries, nil)}
}

// After is what h holds once w is written.
func (h Held) After(w Write) Held {
	h.Entries, h.RecordValue = w.Entries, w.Value
	h.Record = Record{Entries: w.Record, Present: w.Record != nil}
	return h
}
