package holdings

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
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

// TestAnEntryIsOursOnlyAsTheRecordSpellsIt (red team r8, F1): the
// admission policies that keep records true compare entries as strings, so
// a stolen writer token could add 2001:DB8:2::5 beside the user's
// 2001:db8:2::5 - an entry no key held before - and record it. Read by
// value, that record named the user's entry too: the writer took both out,
// the API server refused the unrecorded removal, and every write of the
// writer's to that object after it. Read by spelling, the token's entry
// is ours and goes; the user's, in whatever spelling, stays.
func TestAnEntryIsOursOnlyAsTheRecordSpellsIt(t *testing.T) {
	tests := []struct {
		name                    string
		live, record, desired   []string
		wantEntries, wantRecord []string
	}{
		{"the token's respelled copy beside the user's entry",
			[]string{"2001:db8:2::5", "2001:db8:1::1", "2001:DB8:2::5"}, []string{"2001:db8:1::1", "2001:DB8:2::5"}, []string{"2001:db8:1::1"},
			[]string{"2001:db8:2::5", "2001:db8:1::1"}, []string{"2001:db8:1::1"}},
		{"a zero group written out",
			[]string{"2001:db8:2::5", "2001:db8:2:0::5"}, []string{"2001:db8:2:0::5"}, nil,
			[]string{"2001:db8:2::5"}, nil},
		{"the user's respelled entry beside the record's",
			[]string{"2001:DB8:2::5", "2001:db8:2::5"}, []string{"2001:db8:2::5"}, nil,
			[]string{"2001:DB8:2::5"}, nil},
		{"a record naming a spelling that is not there owns nothing there",
			[]string{"2001:db8:2::/64"}, []string{"2001:0db8:2::/64"}, nil,
			[]string{"2001:db8:2::/64"}, nil},
		{"ours respelled goes, and ours is written as the writer spells it",
			[]string{"192.0.2.7", "2001:DB8:1::1"}, []string{"2001:DB8:1::1"}, []string{"2001:db8:1::1"},
			[]string{"192.0.2.7", "2001:db8:1::1"}, []string{"2001:db8:1::1"}},
		{"the user's respelling of what we would write is the user's: not written twice",
			[]string{"2001:DB8:1::1"}, nil, []string{"2001:db8:1::1"},
			[]string{"2001:DB8:1::1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, rec := Merge(tt.live, tt.record, tt.desired)
			if diff := cmp.Diff(tt.wantEntries, entries); diff != "" {
				t.Errorf("entries (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRecord, rec); diff != "" {
				t.Errorf("record (-want +got)\n%s", diff)
			}
		})
	}
}

// Whatever a user (or anyone who may edit the object) writes into a pool's
// entries and its ownership record: no user entry is ever removed or
// rewritten (an entry is taken out only in the spelling the record names, as
// the admission policies compare them), every desired entry is there, the
// record names only entries we wrote, as written, and merging the result
// again changes nothing (no second write).
func FuzzMerge(f *testing.F) {
	f.Add("192.0.2.0/24, 2001:db8:a::/64", "2001:db8:a::/64", "2001:db8:b::/64,2001:db8:a::/64")
	f.Add("2001:db8:b::1-2001:db8:b::ff,2001:db8:b::1 - 2001:db8:b::ff", "2001:db8:b::1-2001:db8:b::ff", "2001:db8:b::1-2001:db8:b::ff")
	f.Add("10.0.0.1-,::1,,garbage, ::1/128", "garbage,::1", "::1")
	f.Fuzz(func(t *testing.T, liveV, recordV, desiredV string) {
		live, record, desired := Split(liveV), Split(recordV), Split(desiredV)
		entries, newRecord := Merge(live, record, desired)
		owned := map[string]bool{}
		for _, r := range record {
			owned[r] = true
		}
		at := 0
		for _, e := range live {
			if owned[e] {
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
			if !slices.Contains(desired, r) || !slices.Contains(entries, r) {
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
