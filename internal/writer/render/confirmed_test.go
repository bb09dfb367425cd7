package render

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/writer/decide"
)

// DelegationConfirmed says who agrees or disagrees; what a node claims,
// which it may change at every flap, goes to the log, not the status.
func TestDelegationConfirmedSaysWhoSaysWhat(t *testing.T) {
	a, bad := []netip.Prefix{netip.MustParsePrefix("2001:db8:a00::/56")}, []netip.Prefix{netip.MustParsePrefix("2001:db8:bad::/56")}
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	type cond struct {
		OK              bool
		Reason, Message string
	}
	for _, c := range []struct {
		name    string
		confirm decide.Confirmation
		want    cond
	}{
		{"agree", decide.Confirmation{Confirmer: "b", Held: a, Offered: a, Agree: true},
			cond{true, ReasonConfirmed, "client a holds 2001:db8:a00::/56, as the server offers confirmer b"}},
		{"disagree", decide.Confirmation{Confirmer: "b", Held: bad, Offered: a, Since: since},
			cond{false, ReasonDisagree, "client a and confirmer b disagree (a node's digest forged, or a renumbering one has not seen yet; the log names what each reports): the delegation holds as it was; from 12:02:00 another node confirms"}},
		{"no offer yet", decide.Confirmation{Confirmer: "b", Held: bad, Since: since},
			cond{false, ReasonUnconfirmed, "client a holds a delegation; confirmer b reports no offer yet: a change waits for it (from 12:02:00 another node confirms)"}},
		// Two eligible nodes: no other node will confirm (a red team saw
		// the condition promise one); with no lifetime heard (here: the
		// field is the decision's) nothing bounds the stall, and the
		// message says what only the user can do.
		{"disagree, nobody else eligible", decide.Confirmation{Confirmer: "b", Held: bad, Offered: a, Since: since, Alone: true},
			cond{false, ReasonDisagree, "client a and confirmer b disagree (a node's digest forged, or a renumbering one has not seen yet; the log names what each reports): the delegation holds as it was; no other node is eligible to confirm: the pair stays (the server stated no finite lifetime to bound it; name the node to trust in spec.acquisition.dhcpv6pd.nodeNames, make a third node eligible, or set spec.acquisition.dhcpv6pd.trustClientAfter)"}},
		{"nobody to confirm", decide.Confirmation{Solo: "only a is eligible"}, cond{true, ReasonNoConfirmer, "only a is eligible"}},
		// Past trustClientAfter: the client's word counts alone, said
		// without the claim or the confirmer (both change within the
		// episode: a rotation would write the status and announce again).
		{"trusted past trustClientAfter", decide.Confirmation{Confirmer: "b", Held: bad, Since: since, Trusted: since.Add(time.Hour)},
			cond{false, ReasonTrusted, "no confirmer has agreed with client a's delegation for spec.acquisition.dhcpv6pd.trustClientAfter: its word counts alone from 2026-03-01T13:00:00Z until a confirmer agrees or another node is the client (a liar client whose confirmers are kept from confirming wins so: remove trustClientAfter to wait for the confirmation)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok, reason, msg := ConfirmedCondition(decide.Decision{PDClient: "a", Confirm: c.confirm})
			if diff := cmp.Diff(c.want, cond{ok, reason, msg}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
