package dhcp6

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// clientMessage is a client message of type t under id, naming ps for the
// IA_PD of iaid (none: an IA_PD naming no prefix).
func clientMessage(t dhcpv6.MessageType, id Identity, iaid [4]byte, xid byte, ps ...netip.Prefix) *dhcpv6.Message {
	m := &dhcpv6.Message{MessageType: t, TransactionID: dhcpv6.TransactionID{xid, 2, 3}}
	m.AddOption(dhcpv6.OptClientID(id.DUID))
	ia := &dhcpv6.OptIAPD{IaId: iaid}
	for _, p := range ps {
		ia.Options.Add(iaPrefix(p, 0, 0))
	}
	m.AddOption(ia)
	return m
}

// What the client's node makes of the client messages it hears on the
// link: its own (multicast loops back) and a Solicit (a confirmer's, or
// anyone's: it commits nothing) are nothing; a Release or Decline the
// client never sends is an impersonation, and so is a Request, Renew or
// Rebind it did not send naming another prefix than the one held, or
// hinting lifetimes for it (no agent's client hints any).
func TestTheClientsNodeReportsAHostSpeakingAsTheClient(t *testing.T) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := IdentityFor("00000000-0000-4000-8000-000000000001", "home")
	for _, c := range []struct {
		name string
		m    *dhcpv6.Message
		ours bool
		held netip.Prefix
		want bool
	}{
		{"our own Renew, looped back", clientMessage(dhcpv6.MessageTypeRenew, id, id.IAID, 1, pdA), true, pdA, false},
		{"our own Request for the prefix held next", clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, 1, pdB), true, pdA, false},
		{"a Solicit (a confirmer's)", clientMessage(dhcpv6.MessageTypeSolicit, id, id.IAID, 9, netip.MustParsePrefix("::/56")), false, pdA, false},
		{"a Release", clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 9, pdA), false, pdA, true},
		{"a Release while nothing is held", clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 9, pdA), false, netip.Prefix{}, true},
		{"a Decline", clientMessage(dhcpv6.MessageTypeDecline, id, id.IAID, 9, pdA), false, pdA, true},
		{"a Request for another prefix", clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, 9, pdX), false, pdA, true},
		{"a Request for any prefix", clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, 9), false, pdA, true},
		{"a Renew for the held and another", clientMessage(dhcpv6.MessageTypeRenew, id, id.IAID, 9, pdA, pdX), false, pdA, true},
		{"a Rebind for another prefix", clientMessage(dhcpv6.MessageTypeRebind, id, id.IAID, 9, pdB), false, pdA, true},
		{"a Request for the prefix held (another node's client taking over)", clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, 9, pdA), false, pdA, false},
		{"a Renew for the prefix held (a replay)", clientMessage(dhcpv6.MessageTypeRenew, id, id.IAID, 9, pdA), false, pdA, false},
		{"a Renew for the prefix held hinting a valid lifetime of 1 s", hinted(dhcpv6.MessageTypeRenew, id, iaPrefix(pdA, 0, time.Second), 0), false, pdA, true},
		{"a Request for the prefix held hinting a preferred lifetime", hinted(dhcpv6.MessageTypeRequest, id, iaPrefix(pdA, time.Second, 0), 0), false, pdA, true},
		{"a Rebind for the prefix held hinting T1", hinted(dhcpv6.MessageTypeRebind, id, iaPrefix(pdA, 0, 0), time.Second), false, pdA, true},
		{"another node's client's Renew for the prefix held, as Client.iapd asks", asked(dhcpv6.MessageTypeRenew, id, pdA), false, pdA, false},
		{"a Request while nothing is held", clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, 9, pdX), false, netip.Prefix{}, false},
		{"a Request for another IA", clientMessage(dhcpv6.MessageTypeRequest, id, [4]byte{9, 9, 9, 9}, 9, pdX), false, pdA, false},
		{"another client's Release", clientMessage(dhcpv6.MessageTypeRelease, other, other.IAID, 9, pdA), false, pdA, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, ok := readHeard(c.m.ToBytes(), id.IAID)
			if !ok {
				t.Fatal("not read")
			}
			if got := impersonation(h, id, c.ours, c.held) != ""; got != c.want {
				t.Errorf("impersonation: %v, want %v", got, c.want)
			}
		})
	}
}

// hinted is a client message of type t under id whose IA_PD holds o and
// hints t1.
func hinted(t dhcpv6.MessageType, id Identity, o *dhcpv6.OptIAPrefix, t1 time.Duration) *dhcpv6.Message {
	m := &dhcpv6.Message{MessageType: t, TransactionID: dhcpv6.TransactionID{9, 2, 3}}
	m.AddOption(dhcpv6.OptClientID(id.DUID))
	ia := &dhcpv6.OptIAPD{IaId: id.IAID, T1: t1}
	ia.Options.Add(o)
	m.AddOption(ia)
	return m
}

// asked is a client message of type t under id asking for p as the
// client asks (Client.iapd).
func asked(t dhcpv6.MessageType, id Identity, p netip.Prefix) *dhcpv6.Message {
	m := &dhcpv6.Message{MessageType: t, TransactionID: dhcpv6.TransactionID{9, 2, 3}}
	m.AddOption(dhcpv6.OptClientID(id.DUID))
	m.AddOption((&Client{ID: id}).iapd(p))
	return m
}

// The Watch: its own transactions (up to ownSent back) are its own; a
// forged Release is reported every time, logged once per episode; garbage
// is nothing.
func TestAWatchReportsEveryImpersonationAndLogsOncePerEpisode(t *testing.T) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	var reported []time.Time
	w := &Watch{ID: id, Link: "eth0", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Impersonated: func(at time.Time) { reported = append(reported, at) }}
	at := time.Unix(1e9, 0)
	w.holding(pdA)
	for i := range ownSent {
		w.sending(clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, byte(i), pdB))
	}
	for i := range ownSent {
		if w.Heard(clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, byte(i), pdB).ToBytes(), at) {
			t.Fatalf("our own Request %d reported", i)
		}
	}
	w.sending(clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, 0xff, pdB)) // the first falls out of the ring
	if !w.Heard(clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, 0, pdB).ToBytes(), at) {
		t.Error("a replay of a Request past the ring, for another prefix, not reported")
	}
	for _, b := range [][]byte{nil, {1}, {3, 0, 0, 0, 0, 1, 0xff, 0xff}} {
		if w.Heard(b, at) {
			t.Errorf("garbage %x reported", b)
		}
	}
	if !w.Heard(clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 0x77, pdA).ToBytes(), at.Add(time.Minute)) {
		t.Error("a forged Release not reported")
	}
	if !w.Heard(clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 0x78, pdA).ToBytes(), at.Add(2*time.Minute)) {
		t.Error("a second forged Release not reported")
	}
	if len(reported) != 3 || len(w.warned) != 2 {
		t.Errorf("reported %v, warned %v", reported, w.warned)
	}
}
