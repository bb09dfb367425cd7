package render

import (
	"net/netip"
	"testing"
)

// Who holds an address is read from what the object's owner cannot write:
// what this writer gave (its memory, for this leader term; under a
// renumbered prefix, the address with the same host bits), then what the
// load balancer publishes in the object's status, then what a controller
// echoes from its owner's spec (a Gateway's status); the owner's own record
// counts last, only against asks that nothing else tells apart.
func TestAHoldIsReadFromWhatItsOwnerCannotWrite(t *testing.T) {
	const a, b, onC, otherOnC = "2001:db8:1::1", "2001:db8:2::1", "2001:db8:3::1", "2001:db8:3::9"
	given := Given{a: "default/web", "2001:db8:1::9": "tenant/old"}
	pooled := []netip.Prefix{netip.MustParsePrefix("2001:db8:3::/48")}
	for _, tc := range []struct {
		name                        string
		who                         string
		ips, published, echoed, rec []string
		want                        Hold
	}{
		{"the writer gave it the address under the prefix renumbered away", "default/web", []string{onC}, []string{a}, nil, []string{a}, HeldByWriter},
		{"another's address under the new prefix is not its own renumbered", "tenant/old", []string{onC}, nil, nil, []string{onC}, HeldByRecord},
		{"its own renumbered address", "tenant/old", []string{otherOnC}, nil, nil, nil, HeldByWriter},
		{"its load balancer outweighs an echo of its owner's spec", "tenant/lb", []string{b}, []string{b}, []string{b}, nil, HeldByStatus},
		{"its controller echoes one its owner chose", "tenant/gw", []string{b, a}, nil, []string{a}, []string{a}, HeldByEcho},
		{"the writer gave it one of the addresses it asks for", "default/web", []string{b, a}, nil, nil, nil, HeldByWriter},
		{"the writer gave it, and its load balancer publishes it", "default/web", []string{b, a}, []string{a}, nil, []string{a}, HeldByWriter},
		{"another was given it: its own record and status do not outweigh that", "tenant/old", []string{b, a}, []string{b}, nil, []string{a}, HeldByStatus},
		{"its load balancer publishes one", "tenant/lb", []string{b, a}, []string{"192.0.2.7", b}, nil, nil, HeldByStatus},
		{"its load balancer publishes only addresses it no longer asks for", "tenant/lb", []string{b}, []string{a}, nil, nil, HoldsNothing},
		{"only its own record names one", "tenant/old", []string{b, a}, nil, nil, []string{a}, HeldByRecord},
		{"nothing names one", "tenant/new", []string{b, a}, nil, nil, nil, HoldsNothing},
		{"it asks for nothing", "tenant/none", nil, []string{a}, []string{a}, []string{a}, HoldsNothing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HoldOf(tc.who, tc.ips, Seen{Published: tc.published, Echoed: tc.echoed, Recorded: tc.rec}, given, given.Holders()[tc.who], pooled); got != tc.want {
				t.Errorf("HoldOf = %d, want %d", got, tc.want)
			}
		})
	}
}
