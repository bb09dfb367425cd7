package render

import "testing"

// Who holds an address is read from what the object's owner cannot write:
// what this writer gave (its memory, for this leader term), then what the
// load balancer publishes in the object's status; the owner's own record
// counts last, only against asks that nothing else tells apart.
func TestAHoldIsReadFromWhatItsOwnerCannotWrite(t *testing.T) {
	const a, b = "2001:db8:1::1", "2001:db8:2::1"
	given := Given{a: "default/web"}
	for _, tc := range []struct {
		name                string
		who                 string
		ips, published, rec []string
		want                Hold
	}{
		{"the writer gave it one of the addresses it asks for", "default/web", []string{b, a}, nil, nil, HeldByWriter},
		{"the writer gave it, and its load balancer publishes it", "default/web", []string{b, a}, []string{a}, []string{a}, HeldByWriter},
		{"another was given it: its own record and status do not outweigh that", "tenant/old", []string{b, a}, []string{b}, []string{a}, HeldByStatus},
		{"its load balancer publishes one", "tenant/lb", []string{b, a}, []string{"192.0.2.7", b}, nil, HeldByStatus},
		{"its load balancer publishes only addresses it no longer asks for", "tenant/lb", []string{b}, []string{a}, nil, HoldsNothing},
		{"only its own record names one", "tenant/old", []string{b, a}, nil, []string{a}, HeldByRecord},
		{"nothing names one", "tenant/new", []string{b, a}, nil, nil, HoldsNothing},
		{"it asks for nothing", "tenant/none", nil, []string{a}, []string{a}, HoldsNothing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HoldOf(tc.who, tc.ips, tc.published, tc.rec, given); got != tc.want {
				t.Errorf("HoldOf = %d, want %d", got, tc.want)
			}
		})
	}
}
