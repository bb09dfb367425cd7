package dhcp6

import (
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// The model's wider adversary and server (FuzzDHCPv6Client): a crowd of
// fresh DUIDs, a server that refuses or renumbers gracefully, replays of
// anything the link carried, and client messages to the server in the
// client's name, on which the server acts as a real one would.

var forger2 = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 0x67}}

// fresh is a DUID never used before in the run.
func (m *model) fresh() dhcpv6.DUID {
	m.made++
	return &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0x55, byte(m.made >> 8), byte(m.made)}}
}

// lookalike is d with its last byte changed.
func lookalike(d dhcpv6.DUID) dhcpv6.DUID {
	b := d.ToBytes()
	b[len(b)-1] ^= 1
	l, err := dhcpv6.DUIDFromBytes(b)
	if err != nil {
		panic(err)
	}
	return l
}

// widen reads one more byte of the script for the message the client sent:
//   - bits 0-1, a crowd answering it 1 ms after: maxServers-1 refusals and
//     an offer of pdX, maxServers+1 refusals, or maxServers offers of pdX,
//     each under a fresh DUID;
//   - bits 2-3, the server: starts refusing (NoPrefixAvail, NoBinding for
//     the binding it had), stops (binding a new prefix), or renumbers
//     gracefully (the old prefix listed deprecated first);
//   - bits 4-6, a client message in the client's name, 1 ms after: a
//     Release or a Decline of the server's binding, a Request for pdX, a
//     Renew of the prefix held, a replay of the client's last message or
//     of one five back, a Solicit;
//   - bit 7, a replay of a message the link carried to the client (one
//     more byte: which, counted back from the last, and when).
func (m *model) widen(sent *dhcpv6.Message, b byte) {
	for i, n := 0, []int{0, maxServers, maxServers + 1, maxServers}[b&3]; i < n; i++ {
		p, status := pdX, iana.StatusNoPrefixAvail
		if b&3 == 3 || (b&3 == 1 && i == n-1) {
			status = iana.StatusSuccess
		}
		m.l.forge(time.Millisecond, forgedAnswer(sent, m.fresh(), p, status, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 255))
	}
	switch b >> 2 & 3 {
	case 1:
		if m.s.prefix.IsValid() {
			m.s.prefix, m.s.noBinding = netip.Prefix{}, true
			m.renumbered = m.l.clk.Now()
		}
	case 2:
		if !m.s.prefix.IsValid() {
			m.renumber(true)
		}
	case 3:
		if m.s.prefix.IsValid() {
			m.s.graceful = true
			m.renumber(false)
		}
	}
	id := m.run.c.ID
	var c *dhcpv6.Message
	forged := true
	switch b >> 4 & 7 {
	case 1, 2:
		c = clientMessage([]dhcpv6.MessageType{dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline}[b>>4&7-1], id, id.IAID, byte(m.made), m.s.prefix)
	case 3:
		c = clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, byte(m.made), pdX)
	case 4:
		c = clientMessage(dhcpv6.MessageTypeRenew, id, id.IAID, byte(m.made), m.run.held)
	case 5:
		c, forged = sent, false
	case 6:
		c, forged = m.l.sent[max(len(m.l.sent)-6, 0)], false
	case 7:
		c = clientMessage(dhcpv6.MessageTypeSolicit, id, id.IAID, byte(m.made), netip.MustParsePrefix("::/56"))
	}
	if c != nil {
		if forged {
			c.AddOption(dhcpv6.OptServerID(m.s.duid))
			m.forgedClient[c] = true
		}
		m.l.speakAsClient(time.Millisecond, c)
	}
	if b&0x80 != 0 {
		r := m.byte()
		if n := len(m.l.heard); n > 0 {
			m.l.forge(arrivals[r>>5], m.l.heard[max(n-1-int(r&0x1f), 0)])
		}
	}
}

// serverHears: the server acts on a client message in the client's name
// as a real one would - a Release or Decline of its binding frees it (the
// pool gives it to another: the client's next Renew is told NoBinding, and
// its next Solicit offered a new prefix); a Request for another prefix
// moves the binding to a new one - and checks what the client's node made
// of it: a Release or Decline, or a Request for pdX while a prefix other
// than pdX is held, is reported; a replay of the client's own last message
// is not.
func (m *model) serverHears(c *dhcpv6.Message, reported bool) {
	ps := c.Options.OneIAPD().Options.Prefixes()
	names := func(p netip.Prefix) bool {
		for _, o := range ps {
			if q, ok := prefixOf(o.Prefix); ok && q == p {
				return true
			}
		}
		return false
	}
	var want bool
	switch c.MessageType {
	case dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		want = true
		if m.s.prefix.IsValid() && names(m.s.prefix) {
			m.renumber(true)
		}
	case dhcpv6.MessageTypeRequest:
		if m.s.prefix.IsValid() && !names(m.s.prefix) {
			m.renumber(true)
		}
		want = names(pdX) && m.run.held.IsValid() && m.run.held != pdX
	}
	if !m.forgedClient[c] {
		want = false // a replay of the client's own: ours, nothing to report
	}
	if reported != want {
		m.t.Fatalf("the client's node heard a %s in the client's name (transaction %x, holding %q): reported %v, want %v",
			c.MessageType, c.TransactionID, m.run.held, reported, want)
	}
}
