package render

import (
	"strings"
	"time"

	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
)

// Reasons of DelegationConfirmed.
const (
	ReasonConfirmed   = "Confirmed"
	ReasonUnconfirmed = "Unconfirmed"
	ReasonDisagree    = "DelegationDisagrees"
	ReasonNoConfirmer = "NoConfirmer"
	// ReasonInterfaceTaken: another DynamicPrefix, first by name, runs
	// the agents' client on the interface (model.Model.PDTakenBy).
	ReasonInterfaceTaken = "InterfaceTaken"
	// ReasonStalled (of Degraded): the client and the confirmer, with
	// nobody else eligible, disagree past the server's stated lifetime.
	ReasonStalled = "DelegationStalled"
	// ReasonTrusted: the client's delegation went unconfirmed longer than
	// spec.acquisition.dhcpv6pd.trustClientAfter, and its word counts
	// alone (decide.Confirmation.Trusted).
	ReasonTrusted = "ClientTrusted"
)

// TrustedMessage says that the client's unconfirmed word counts alone, and
// why (the bound the user set).
func TrustedMessage(d decide.Decision) string {
	return "no confirmer has agreed with client " + d.PDClient + "'s delegation for spec.acquisition.dhcpv6pd.trustClientAfter: its word counts alone from " +
		d.Confirm.Trusted.UTC().Format(time.RFC3339) + " until a confirmer agrees or another node is the client (a liar client whose confirmers are kept from confirming wins so: remove trustClientAfter to wait for the confirmation)"
}

// next says what follows a disagreement that began at c.Since: another node
// confirms from the rotation, or, with nobody else eligible, nothing moves
// and it is reported Degraded from c.StallsAt.
func next(c decide.Confirmation) string {
	switch at := c.StallsAt(); {
	case c.Alone && at.IsZero():
		return "no other node is eligible to confirm: the pair stays (the server stated no finite lifetime to bound it; name the node to trust in spec.acquisition.dhcpv6pd.nodeNames, make a third node eligible, or set spec.acquisition.dhcpv6pd.trustClientAfter)"
	case c.Alone:
		return "no other node is eligible to confirm: the pair stays, reported Degraded from " + at.UTC().Format("15:04:05")
	}
	return "from " + c.Rotates().UTC().Format("15:04:05") + " another node confirms"
}

// StalledMessage says why a two-node disagreement is Degraded and what only
// the user can do about it.
func StalledMessage(d decide.Decision) string {
	c := d.Confirm
	return "client " + d.PDClient + " and confirmer " + c.Confirmer + " have disagreed since " + c.Since.UTC().Format(time.RFC3339) +
		", longer than the lifetime the server stated for the current prefix, and no third node is eligible: nothing tells which of the two is lying (a node's digest forged), so " +
		"the delegation holds as it was - a prefix the server may have let lapse, or its real one a liar would remove. " +
		"Name the node to trust in spec.acquisition.dhcpv6pd.nodeNames, make a third node eligible, or set spec.acquisition.dhcpv6pd.trustClientAfter to trust the client after a bound"
}

// TakenMessage says why m adopts nothing from its interface's delegations.
func TakenMessage(m model.Model) string {
	return "DynamicPrefix " + m.PDTakenBy + " (first by name) runs the agents' DHCPv6 client on " + m.PDInterface +
		": the agents run one client per interface, and its delegation is the server's answer to " + m.PDTakenBy +
		"'s identity, not this one's; nothing is adopted from " + m.PDInterface +
		" here (give this DynamicPrefix another interface, or delete one of the two)"
}

// ConfirmedCondition is DelegationConfirmed for decision d: whether the
// client's and the confirmer's word agree, and what each says when not.
func ConfirmedCondition(d decide.Decision) (bool, string, string) {
	c := d.Confirm
	held := list(c.Held)
	switch {
	case c.Solo != "":
		return true, ReasonNoConfirmer, c.Solo
	case !c.Trusted.IsZero():
		return false, ReasonTrusted, TrustedMessage(d)
	case c.Agree && len(c.Held) == 0:
		return true, ReasonConfirmed, "nothing to confirm: client " + d.PDClient + " holds no delegation, and none is offered to confirmer " + c.Confirmer
	case c.Agree:
		return true, ReasonConfirmed, "client " + d.PDClient + " holds " + held + ", as the server offers confirmer " + c.Confirmer
	case c.Disagrees():
		// What each reports goes to the log: in the message, a node
		// flapping its digest would write the status once per flap.
		return false, ReasonDisagree, "client " + d.PDClient + " and confirmer " + c.Confirmer +
			" disagree (a node's digest forged, or a renumbering one has not seen yet; the log names what each reports): the delegation holds as it was; " + next(c)
	case len(c.Held) == 0:
		return false, ReasonUnconfirmed, "client " + d.PDClient + " holds nothing yet, and the server offers confirmer " + c.Confirmer +
			" a delegation (" + next(c) + ")"
	}
	return false, ReasonUnconfirmed, "client " + d.PDClient + " holds a delegation; confirmer " + c.Confirmer +
		" reports no offer yet: a change waits for it (" + next(c) + ")"
}

// DisagreeMessage says what the client and the confirmer report when they
// disagree.
func DisagreeMessage(d decide.Decision) string {
	c := d.Confirm
	return "client " + d.PDClient + " holds " + list(c.Held) + " but the server offers confirmer " + c.Confirmer + " " + list(c.Offered) +
		" (a node's digest forged, or a renumbering one has not seen yet): the delegation holds as it was; " + next(c)
}

func list[T interface{ String() string }](ps []T) string {
	if len(ps) == 0 {
		return "nothing"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
