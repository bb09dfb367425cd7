package holdings

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// One write of a pool: what is ours (the record, or without one the exact
// or geometric rule), what it then holds, and that holding it is a fixed
// point - the next pass writes nothing.
func TestAPoolWriteIsOneStep(t *testing.T) {
	managed := []netip.Prefix{netip.MustParsePrefix("2001:db8:a::/48")}
	desired := []string{"2001:db8:b::/64", "2001:db8:a::/64"}
	tests := []struct {
		name  string
		held  Held
		exact bool
		want  Write
	}{
		{"the record says what is ours", Held{Entries: []string{"192.0.2.0/24", "2001:db8:a::/64"},
			Record: Record{Present: true, Entries: []string{"2001:db8:a::/64"}}, RecordValue: "2001:db8:a::/64"}, false,
			Write{Entries: []string{"192.0.2.0/24", "2001:db8:b::/64", "2001:db8:a::/64"}, Owned: []string{"2001:db8:a::/64"},
				Record: desired, Value: "2001:db8:b::/64,2001:db8:a::/64"}},
		{"without a record, what lies inside a managed prefix", Held{Entries: []string{"2001:db8:a:1::/64", "2001:db8::/32"}}, false,
			Write{Entries: []string{"2001:db8::/32", "2001:db8:b::/64", "2001:db8:a::/64"}, Owned: []string{"2001:db8:a:1::/64"},
				Record: desired, Value: "2001:db8:b::/64,2001:db8:a::/64"}},
		{"without a record, exactly: only what we would write", Held{Entries: []string{"2001:db8:a:1::/64", "2001:db8:a::/64"}}, true,
			Write{Entries: []string{"2001:db8:a:1::/64", "2001:db8:b::/64", "2001:db8:a::/64"}, Owned: []string{"2001:db8:a::/64"},
				Record: desired, Value: "2001:db8:b::/64,2001:db8:a::/64"}},
		{"held already", Held{Entries: []string{"2001:db8:b::/64", "2001:db8:a::/64"},
			Record: Record{Present: true, Entries: desired}}, false,
			Write{Entries: desired, Owned: desired, Record: desired, Kept: true, Holds: true}},
		{"the user's entry equal to ours stays the user's", Held{Entries: []string{"2001:db8:b::/64"}, Record: Record{Present: true}}, false,
			Write{Entries: []string{"2001:db8:b::/64", "2001:db8:a::/64"}, Record: []string{"2001:db8:a::/64"}, Value: "2001:db8:a::/64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.held.Claim(desired, tt.exact, managed)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Claim (-want +got):\n%s", diff)
			}
			if again := tt.held.After(got).Claim(desired, tt.exact, managed); !again.Holds {
				t.Errorf("after the write, the next pass writes again: %+v", again)
			}
		})
	}
}

// A release takes ours out and removes the record; the user's stay.
func TestAReleaseKeepsTheUsersEntries(t *testing.T) {
	h := Held{Entries: []string{"2001:db8:b::/64", "192.0.2.0/24"}, Record: Record{Present: true, Entries: []string{"2001:db8:b::/64"}},
		RecordValue: "2001:db8:b::/64"}
	got := h.Release()
	want := Write{Entries: []string{"192.0.2.0/24"}, Owned: []string{"2001:db8:b::/64"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Release (-want +got):\n%s", diff)
	}
	if after := h.After(got); after.Record.Present || after.RecordValue != "" {
		t.Errorf("after a release the record is %+v %q, want none", after.Record, after.RecordValue)
	}
}
