package render

import (
	"fmt"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
)

// One node flapping its digest writes the status once per episode, not once
// per flap. Three nodes a, b, c; a honest client, b honest confirmer, both
// agreeing on the current prefix; the liar flaps within ConfirmWithin. Each
// pass renders the status from the last one written and counts a write
// whenever it differs (StatusEqual, as the controller compares): the
// current prefix, the roles and the fact of a disagreement stay the same.
// (A confirmer flapping between agreeing and not changes DelegationConfirmed
// each time, a real change: the write-storm breaker bounds those.)
func TestAFlappingNodeWritesTheStatusOncePerEpisode(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m := model.Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}})
	dec := func(s string) digest.Node {
		n, err := digest.Decode(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const held = "v1;wan=2001:db8:a00::/56 p pd"
	const offer = "v1;wan=2001:db8:a00::/56 p offer"
	for _, c := range []struct {
		name  string
		roles [2]string // client, confirmer
		liar  int       // index of the liar among a, b, c
		flap  func(i int) string
	}{
		{"the liar is the client and claims a new forged /56 each flap", [2]string{"a", "b"}, 0,
			func(i int) string { return fmt.Sprintf("v1;wan=2001:db8:b%02x::/56 p pd", i%200) }},
		{"the liar is the confirmer and offers a new forged /56 each flap", [2]string{"a", "b"}, 1,
			func(i int) string { return fmt.Sprintf("v1;wan=2001:db8:b%02x::/56 p offer", i%200) }},
		{"the liar is neither and flaps offers (held)", [2]string{"a", "b"}, 2,
			func(i int) string { return fmt.Sprintf("v1;wan=2001:db8:b%02x::/56 p pd+offer", i%200) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			digests := []string{held, offer, "v1;wan="}
			dp := &api.DynamicPrefix{}
			dp.Status = api.Status{CurrentPrefix: "2001:db8:a00::/56", PrefixSource: "dhcpv6-pd",
				DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: c.roles[0], ConfirmerNode: c.roles[1]}}
			pass := func(at time.Time) bool {
				var rs []decide.Report
				for i, s := range digests {
					rs = append(rs, decide.Report{Node: string(rune('a' + i)), Digest: dec(s)})
				}
				d := decide.For(m, Prior(dp.Status), rs, at)
				st := Status(dp, m, d, Problems{}, at)
				if StatusEqual(st, dp.Status) {
					return false
				}
				dp.Status = st
				return true
			}
			pass(t0) // settle
			pass(t0)
			writes := 0
			const flaps = 20
			for i := range flaps {
				digests[c.liar] = c.flap(i)
				if pass(t0.Add(time.Duration(i) * time.Second)) { // 20 flaps within ConfirmWithin: no rotation
					writes++
				}
			}
			t.Logf("%d status writes for %d flaps; last dhcpv6pd %+v", writes, flaps, *dp.Status.DHCPv6PD)
			if writes > 2 {
				t.Errorf("%d status writes for %d flaps of one node's digest (want at most 2: the disagreement starting, and ending)", writes, flaps)
			}
		})
	}
}
