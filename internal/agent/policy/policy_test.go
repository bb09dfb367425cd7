package policy

import (
	"net/netip"
	"testing"
)

func TestPolicyLengthBounds(t *testing.T) {
	pol := Policy{GlobalOnly: true, MinLength: 48, MaxLength: 64}
	for p, ok := range map[string]bool{"2001:db8::/48": true, "2001:db8::/64": true, "2001:db8::/32": false, "2001:db8::/80": false, "fd00::/64": false} {
		if err := pol.Check("eth0", netip.MustParsePrefix(p)); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", p, err, ok)
		}
	}
}
