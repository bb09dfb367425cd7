package holdings

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const operatorBlocks = "range=2001:db8:2:100:f000::-2001:db8:2:100:ffff:ffff:ffff:ffff,cidr=2001:db8:2:100::/112"

func TestReadRecord(t *testing.T) {
	tests := []struct {
		name     string
		value    string
		present  bool
		spelling Spelling
		want     Record
	}{
		{"the existing operator's block keys", operatorBlocks, true, BlockKeys, Record{Present: true,
			Entries: []string{"2001:db8:2:100:f000::-2001:db8:2:100:ffff:ffff:ffff:ffff", "2001:db8:2:100::/112"}}},
		{"a block without stop", "range=2001:db8::5", true, BlockKeys, Record{Present: true, Entries: []string{"2001:db8::5-"}}},
		// An entry is ours only as the record spells it (Merge), as the
		// admission policies read it (red team r8, F1).
		{"keys keep their spelling", "cidr=2001:0DB8::/64,range=2001:DB8::1-2001:db8:0::9", true, BlockKeys, Record{Present: true,
			Entries: []string{"2001:0DB8::/64", "2001:DB8::1-2001:db8:0::9"}}},
		{"renumber's earlier plain spelling of blocks", "2001:db8::/64,2001:db8::1-2001:db8::9", true, BlockKeys, Record{Present: true,
			Entries: []string{"2001:db8::/64", "2001:db8::1-2001:db8::9"}}},
		{"a listed record", " 2001:0db8::/64 , ,2001:db8::1", true, Listed, Record{Present: true, Entries: []string{"2001:0db8::/64", "2001:db8::1"}}},
		{"present and empty owns nothing", "", true, Listed, Record{Present: true}},
		{"absent", "", false, BlockKeys, Record{}},
		{"what names no entry is unreadable, not an entry", "cidr=banana,range=,start=2001:db8::1,2001:db8::/64", true, BlockKeys,
			Record{Present: true, Entries: []string{"2001:db8::/64"}, Unreadable: []string{"cidr=banana", "range=", "start=2001:db8::1"}}},
		// No block is a bare address: "cidr=::" would not read back (FuzzRecord).
		{"a bare address in block keys is unreadable", "::,2001:db8::1,2001:db8::/64", true, BlockKeys,
			Record{Present: true, Entries: []string{"2001:db8::/64"}, Unreadable: []string{"::", "2001:db8::1"}}},
		{"an address with a zone is no entry", "2001:db8::1%eth0,::-::%-", true, Listed,
			Record{Present: true, Unreadable: []string{"2001:db8::1%eth0", "::-::%-"}}},
		{"a block's field holds no space", "range=2001:db8::1 -2001:db8::9,:: -", true, BlockKeys,
			Record{Present: true, Unreadable: []string{"range=2001:db8::1 -2001:db8::9", ":: -"}}},
		{"block keys in a listed record are unreadable", "cidr=2001:db8::/64", true, Listed,
			Record{Present: true, Unreadable: []string{"cidr=2001:db8::/64"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ReadRecord(tt.value, tt.present, tt.spelling)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestWriteRecordSpellsBlocksAsTheExistingOperatorDoes(t *testing.T) {
	r := ReadRecord(operatorBlocks, true, BlockKeys)
	if got := WriteRecord(r.Entries, BlockKeys); got != operatorBlocks {
		t.Errorf("WriteRecord = %q, want %q", got, operatorBlocks)
	}
	if got := WriteRecord([]string{"2001:db8::5-"}, BlockKeys); got != "range=2001:db8::5" {
		t.Errorf("a block without stop: %q", got)
	}
	if got := WriteRecord([]string{"2001:db8::/64", "2001:db8::1-2001:db8::9"}, Listed); got != "2001:db8::/64,2001:db8::1-2001:db8::9" {
		t.Errorf("listed: %q", got)
	}
}

func TestGeometricIsTheExistingOperatorsRuleWithoutARecord(t *testing.T) {
	managed := []netip.Prefix{netip.MustParsePrefix("2001:db8:b::/64"), netip.MustParsePrefix("2001:db8:a::/64")}
	live := []string{
		"192.0.2.0/24",                           // IPv4: the user's
		"2001:db8:b::/64",                        // a managed prefix itself: claimed
		"2001:db8:a:0:f000::/68",                 // inside one: claimed
		"2001:db8::/48",                          // a supernet the user pinned: kept
		"2001:db8:a::1-2001:db8:a::9",            // both ends inside one: claimed
		"2001:db8:a::1-2001:db8:b::9",            // ends in two prefixes: kept
		"2001:db8:c::/64",                        // another prefix: kept
		"2001:db8:b::7",                          // an address inside: claimed
		"fd00::/64",                              // kept
		"not-an-entry",                           // kept
		"2001:0DB8:B:0:f000::1-2001:db8:b::ffff", // spelled oddly, inside: claimed, as spelled
	}
	want := []string{"2001:db8:b::/64", "2001:db8:a:0:f000::/68", "2001:db8:a::1-2001:db8:a::9", "2001:db8:b::7",
		"2001:0DB8:B:0:f000::1-2001:db8:b::ffff"}
	if diff := cmp.Diff(want, Geometric(live, managed)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if got := Geometric(live, nil); len(got) != 0 {
		t.Errorf("no managed prefix claims nothing: %q", got)
	}
}

func TestSameSetIgnoresOrderAndSpelling(t *testing.T) {
	if !SameSet([]string{"192.0.2.0/24", "2001:db8:b::/64", "2001:db8:a::/64"}, []string{"2001:db8:a::/64", "192.0.2.0/24", "2001:0DB8:B::/64"}) {
		t.Error("the same entries in another order are the same set")
	}
	if SameSet([]string{"2001:db8:b::/64"}, []string{"2001:db8:b::/64", "2001:db8:a::/64"}) {
		t.Error("an entry more is not the same set")
	}
}

func TestLeadsAsksOnlyThatTheCurrentEntryComesFirstOfOurs(t *testing.T) {
	record := []string{"2001:db8:c::/64", "2001:db8:b::/64", "2001:db8:a::/64"} // current first
	for _, c := range []struct {
		live []string
		want bool
	}{
		{[]string{"192.0.2.0/24", "2001:db8:c::/64", "2001:db8:b::/64", "2001:db8:a::/64"}, true},
		// The existing operator's order: draining oldest first.
		{[]string{"192.0.2.0/24", "2001:db8:c::/64", "2001:db8:a::/64", "2001:db8:b::/64"}, true},
		// A user entry before ours changes nothing.
		{[]string{"2001:0db8:c::/64", "10.0.0.0/8", "2001:db8:a::/64"}, true},
		// C became current again: it must move to the front.
		{[]string{"192.0.2.0/24", "2001:db8:b::/64", "2001:db8:c::/64", "2001:db8:a::/64"}, false},
		// None of ours is live yet.
		{[]string{"192.0.2.0/24"}, false},
	} {
		if got := Leads(c.live, record); got != c.want {
			t.Errorf("Leads(%q) = %v, want %v", c.live, got, c.want)
		}
	}
	if !Leads([]string{"192.0.2.0/24"}, nil) {
		t.Error("an empty record leads anything")
	}
}

// FuzzRecord: a record read from an annotation anyone could have edited reads
// back identically after being written, in either spelling, never yields an
// empty entry, and every item is either an entry or unreadable.
func FuzzRecord(f *testing.F) {
	f.Add("2001:db8::/64,2001:db8::1-2001:db8::9")
	f.Add(" , ,2001:0db8::/64 ")
	f.Add(operatorBlocks)
	f.Add("range=2001:db8::5,cidr=x")
	f.Fuzz(func(t *testing.T, v string) {
		for _, s := range []Spelling{Listed, BlockKeys} {
			r := ReadRecord(v, true, s)
			again := ReadRecord(WriteRecord(r.Entries, s), true, s)
			if !slices.Equal(again.Entries, r.Entries) || len(again.Unreadable) > 0 {
				t.Fatalf("round trip of %q (%d): %q -> %+v", v, s, r.Entries, again)
			}
			if slices.Contains(r.Entries, "") {
				t.Fatalf("empty entry from %q", v)
			}
		}
	})
}

// TestCommonClaimsOnlyWhatWeWouldWrite: without a record, a kind that claims
// exactly (a NetworkPolicy) owns only the entries equal to one it would
// write - not a host or a narrower block inside the prefix - each as it
// is spelled there (what the record will name is what the write takes out).
func TestCommonClaimsOnlyWhatWeWouldWrite(t *testing.T) {
	live := []string{"192.0.2.0/24", "2001:db8:a::5/128", "2001:db8:a:0::/64", "2001:db8:a::/64", "2001:db8:a::/120"}
	if got, want := Common(live, []string{"2001:db8:a::/64", "2001:db8:b::/64"}), []string{"2001:db8:a:0::/64", "2001:db8:a::/64"}; !slices.Equal(got, want) {
		t.Errorf("Common = %q, want %q", got, want)
	}
}
