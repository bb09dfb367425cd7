package agent

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/agent/policy"
)

// A router believed on the PD link (trustedRouters unset: every router is)
// advertising 40 /64s fills the digest; the confirmer's offer still gets its
// slot (an RA prefix is evicted for it, and said so), where it was left out
// without a word and the delegation it would confirm waited for ever. Found
// by a red team.
func TestAFullDigestStillCarriesTheConfirmersOffer(t *testing.T) {
	a, rec, clk, _ := startWith(t, Config{}, "")
	a.SetLinks(map[string]policy.Policy{"eth0": {GlobalOnly: true, Delegated: true}})
	var ps []observe.RAPrefix
	for i := range 40 {
		ps = append(ps, observe.RAPrefix{Prefix: netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/64", 0x100+i)), Valid: time.Hour, Preferred: time.Hour, Autonomous: true})
	}
	a.RA("eth0", router, clk.Now(), ps)
	sync_(a)
	offered := netip.MustParsePrefix("2001:db8:a00::/56")
	a.Offered("eth0", offered, time.Hour, false, clk.Now())
	sync_(a)
	waitPublishedWith(t, rec, clk, "the offer", func(v string) bool { return strings.Contains(v, offered.String()+" p offer") })
}
