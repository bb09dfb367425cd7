package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"k8s.io/utils/clock"
)

// A host can speak to the server as the client: the client's DUID travels
// in its every multicast, and a Release or a Request under it moves the
// server's own binding (a forged Release in the cluster's name renumbers
// the cluster when the attacker likes). Nothing on the link can stop that
// but DHCPv6-Shield or SAVI on the switch. It can be heard, though: RFC
// 8415 clients send to All_DHCP_Relay_Agents_and_Servers (ff02::1:2), so
// the node running the client hears every message under its DUID, its own
// included (multicast loops back), and knows which ones it sent.
//
// Only the client's node listens: it alone can tell its own Requests,
// Renews and Rebinds from a forger's (by transaction ID); a confirmer could
// judge a Release only, which the client's node hears as well.

// ownSent is how many of its own transaction IDs a Watch remembers: a
// replay of one of them asks for nothing the client did not ask for.
const ownSent = 64

// Watch judges the client messages heard on the link against what its
// client sent and holds. Safe from any goroutine.
type Watch struct {
	ID   Identity
	Link string
	Log  *slog.Logger
	// Impersonated is told each message under the client's DUID that the
	// client did not send and that may move the server's binding.
	Impersonated func(at time.Time)

	mu     sync.Mutex
	sent   [ownSent]dhcpv6.TransactionID
	n      int          // transaction IDs recorded (the ring's next slot is n % ownSent)
	held   netip.Prefix // the prefix the client holds (invalid: none)
	warned time.Time    // the last impersonation logged (zero: none)
}

// quietFor: an impersonation heard within this of the last logged one is
// the same episode, counted and reported but not logged again.
const quietFor = 10 * time.Minute

// sending records a transaction of the client's own.
func (w *Watch) sending(x dhcpv6.TransactionID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent[w.n%ownSent] = x
	w.n++
}

// holding records the prefix the client holds (invalid: none).
func (w *Watch) holding(p netip.Prefix) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held = p
}

// Heard judges one datagram heard on the servers' port; it reports whether
// it was an impersonation.
func (w *Watch) Heard(b []byte, at time.Time) bool {
	m, err := dhcpv6.MessageFromBytes(b)
	if err != nil {
		return false
	}
	w.mu.Lock()
	ours := false
	for i := range min(w.n, ownSent) {
		ours = ours || w.sent[i] == m.TransactionID
	}
	why := impersonation(m, w.ID, ours, w.held)
	log := why != "" && (w.warned.IsZero() || at.Sub(w.warned) >= quietFor)
	if why != "" {
		w.warned = at
	}
	w.mu.Unlock()
	if why == "" {
		return false
	}
	if log {
		w.Log.Warn("DHCPv6: another host speaks to the server as this client ("+why+"); the server may move the delegation, the agents take nothing from it (DHCPv6-Shield or SAVI on the switch stops it)",
			"link", w.Link, "type", m.MessageType.String())
	}
	if w.Impersonated != nil {
		w.Impersonated(at)
	}
	return true
}

// impersonation is why m, heard on the servers' port, is a message under
// id's DUID its client did not send and that may move the server's binding
// ("": none). ours: m's transaction is one the client sent. A Solicit
// commits nothing (and confirmers send them under the same DUID); the
// client never releases or declines; a Request, Renew or Rebind it did not
// send matters when it names for id's IA_PD anything but the prefix held -
// another node's client taking the role over asks for the same.
func impersonation(m *dhcpv6.Message, id Identity, ours bool, held netip.Prefix) string {
	if cid := m.Options.ClientID(); cid == nil || !cid.Equal(id.DUID) || ours {
		return ""
	}
	switch m.MessageType {
	case dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		return "a " + m.MessageType.String() + " the client never sends"
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind:
	default:
		return ""
	}
	if !held.IsValid() {
		return ""
	}
	for _, ia := range m.Options.IAPD() {
		if ia.IaId != id.IAID {
			continue
		}
		ps := ia.Options.Prefixes()
		if len(ps) == 0 {
			return fmt.Sprintf("a %s for any prefix, %s held", m.MessageType, held)
		}
		for _, o := range ps {
			if p, ok := prefixOf(o.Prefix); !ok || p != held {
				return fmt.Sprintf("a %s for %s, %s held", m.MessageType, o.Prefix, held)
			}
		}
	}
	return ""
}

// Run reads conn (ListenServers) until ctx ends or the socket fails.
func (w *Watch) Run(ctx context.Context, conn Conn, clk clock.PassiveClock) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var buf [1500]byte
	for ctx.Err() == nil {
		n, _, err := conn.ReadFrom(buf[:])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("dhcp6: listening on the servers' port: %w", err)
		}
		w.Heard(buf[:n], clk.Now())
	}
	return ctx.Err()
}
