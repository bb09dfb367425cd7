package holdings

import (
	"slices"
	"testing"
)

func TestMergeNeverTouchesUserEntries(t *testing.T) {
	live := []string{"192.0.2.0/24", "2001:db8:a::/64", "2001:0db8:ffff::/48", "2001:db8:a:0:f000::-2001:db8:a:0:ffff:ffff:ffff:ffff"}
	record := []string{"2001:db8:a:0:f000::-2001:db8:a:0:ffff:ffff:ffff:ffff"}
	desired := []string{"2001:db8:b:0:f000::-2001:db8:b:0:ffff:ffff:ffff:ffff", "2001:db8:a:0:f000::-2001:db8:a:0:ffff:ffff:ffff:ffff"}
	entries, rec := Merge(live, record, desired)
	want := []string{"192.0.2.0/24", "2001:db8:a::/64", "2001:0db8:ffff::/48",
		"2001:db8:b:0:f000::-2001:db8:b:0:ffff:ffff:ffff:ffff", "2001:db8:a:0:f000::-2001:db8:a:0:ffff:ffff:ffff:ffff"}
	if !slices.Equal(entries, want) {
		t.Errorf("entries = %q\nwant %q", entries, want)
	}
	if !slices.Equal(rec, desired) {
		t.Errorf("record = %q, want %q", rec, desired)
	}
}

func TestUserEntryEqualToManagedStaysTheUsers(t *testing.T) {
	entries, rec := Merge([]string{"2001:db8:b::/64"}, nil, []string{"2001:db8:b::/64"})
	if !slices.Equal(entries, []string{"2001:db8:b::/64"}) || len(rec) != 0 {
		t.Errorf("entries %q record %q: the user's entry must stay theirs, not duplicated", entries, rec)
	}
}

// Whatever a user (or anyone who may edit the object) writes into a pool's
// entries and its ownership record: no user entry is ever removed or
// rewritten, every desired entry is there, the record names only entries we
// wrote, and merging the result again changes nothing (no second write).
func FuzzMerge(f *testing.F) {
	f.Add("192.0.2.0/24, 2001:db8:a::/64", "2001:db8:a::/64", "2001:db8:b::/64,2001:db8:a::/64")
	f.Add("2001:db8:b::1-2001:db8:b::ff,2001:db8:b::1 - 2001:db8:b::ff", "2001:db8:b::1-2001:db8:b::ff", "2001:db8:b::1-2001:db8:b::ff")
	f.Add("10.0.0.1-,::1,,garbage, ::1/128", "garbage,::1", "::1")
	f.Fuzz(func(t *testing.T, liveV, recordV, desiredV string) {
		live, record, desired := Split(liveV), Split(recordV), Split(desiredV)
		entries, newRecord := Merge(live, record, desired)
		owned := claimed(record)
		at := 0
		for _, e := range live {
			if owned[Canonical(e)] {
				continue
			}
			i := slices.Index(entries[at:], e)
			if i < 0 {
				t.Fatalf("user entry %q lost or out of order: %q from %q", e, entries, live)
			}
			at += i + 1
		}
		for _, d := range desired {
			if !slices.ContainsFunc(entries, func(e string) bool { return Canonical(e) == Canonical(d) }) {
				t.Errorf("desired %q missing from %q", d, entries)
			}
		}
		for _, r := range newRecord {
			if !slices.ContainsFunc(desired, func(d string) bool { return Canonical(d) == r }) {
				t.Errorf("record %q names %q, which we did not want", newRecord, r)
			}
		}
		again, againRecord := Merge(entries, newRecord, desired)
		if !slices.Equal(again, entries) || !slices.Equal(againRecord, newRecord) {
			t.Errorf("merging again: %q %q, was %q %q", again, againRecord, entries, newRecord)
		}
		if c := Canonical(desiredV); Canonical(c) != c {
			t.Errorf("Canonical(%q) = %q, not a fixed point", desiredV, c)
		}
	})
}

// claimed is the set of entries' canonical forms.
func claimed(entries []string) map[string]bool {
	out := map[string]bool{}
	for _, e := range entries {
		out[Canonical(e)] = true
	}
	return out
}
