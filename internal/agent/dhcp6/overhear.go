package dhcp6

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
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
// Renews and Rebinds from a forger's (by their content, not their
// transaction ID alone: a forger hears that too); a confirmer could judge a
// Release only, which the client's node hears as well. A message to any
// group (a server bound to [::]:547 is handed every group its link joined)
// is heard, a Relay-Forward unwrapped however deep; one sent unicast to a
// server is not (the Client's NoBinding while the prefix is valid reports
// its result).

// ownSent is how many of its own messages a Watch remembers: a replay of
// one of them asks for nothing the client did not ask for.
const ownSent = 64

// episodes is how many kinds of impersonation a Watch remembers warning
// of; with all of them within quietFor, another kind is counted and
// reported but not logged until one lapses.
const episodes = 16

// Watch judges the client messages heard on the link against what its
// client sent and holds. Safe from any goroutine.
type Watch struct {
	ID   Identity
	Link string
	Log  *slog.Logger
	// Impersonated is told each message under the client's DUID that the
	// client did not send and that may move the server's binding.
	Impersonated func(at time.Time)
	// Missed is told of n packets the listener's queue dropped unread (a
	// flood faster than the Watch reads): an impersonation among them
	// went unheard.
	Missed func(n int, at time.Time)

	mu     sync.Mutex
	sent   [ownSent][sha256.Size]byte // the client's messages (overheard.Print)
	n      int                        // messages recorded (the ring's next slot is n % ownSent)
	held   netip.Prefix               // the prefix the client holds (invalid: none)
	warned map[string]time.Time       // each kind of impersonation: when its episode's warning was logged
}

// quietFor: an impersonation of a kind warned of within this of the
// episode's warning is counted and reported but not logged again. It runs
// from the warning, not the last message: steady junk of one kind cannot
// keep a warning silent, and a new kind (or prefix) warns at once.
const quietFor = 10 * time.Minute

// sending records a message of the client's own.
func (w *Watch) sending(m *dhcpv6.Message) {
	if w == nil {
		return
	}
	h, _ := readHeard(m.ToBytes(), w.ID.IAID)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent[w.n%ownSent] = h.Print
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
	h, ok := readHeard(b, w.ID.IAID)
	if !ok {
		return false
	}
	w.mu.Lock()
	ours := false
	for i := range min(w.n, ownSent) {
		ours = ours || w.sent[i] == h.Print
	}
	held := w.held
	w.mu.Unlock()
	return w.report(impersonation(h, w.ID, ours, held), h, at)
}

// HeardPacket judges one IPv6 packet heard on the link (ListenServers): a
// datagram to the servers' port in it is judged as Heard does, and the
// first fragment of a longer one by what it shows (partImpersonation).
func (w *Watch) HeardPacket(pkt []byte, at time.Time) bool {
	d, ok := readPacket(pkt)
	switch {
	case !ok:
		return false
	case !d.Partial:
		return w.Heard(d.Payload, at)
	}
	h, _ := readHeard(d.Payload, w.ID.IAID)
	return w.report(partImpersonation(d.Payload, h, w.ID), h, at)
}

// report logs (once an episode) and tells Impersonated of an impersonation
// why (""; none) heard at in h; it reports whether there was one.
func (w *Watch) report(why string, h overheard, at time.Time) bool {
	if why == "" {
		return false
	}
	w.mu.Lock()
	log := w.warn(why, at)
	w.mu.Unlock()
	if log {
		w.Log.Warn("DHCPv6: another host speaks to the server as this client ("+why+"); the server may move the delegation, the agents take nothing from it (DHCPv6-Shield or SAVI on the switch stops it)",
			"link", w.Link, "type", h.Type.String(), "relayed", h.Relayed)
	}
	if w.Impersonated != nil {
		w.Impersonated(at)
	}
	return true
}

// warn reports whether an impersonation of kind why, heard at, opens an
// episode to log, and notes it. w.mu is held.
func (w *Watch) warn(why string, at time.Time) bool {
	if t, ok := w.warned[why]; ok && at.Sub(t) < quietFor {
		return false
	}
	if w.warned == nil {
		w.warned = map[string]time.Time{}
	}
	if len(w.warned) >= episodes {
		for k, t := range w.warned {
			if at.Sub(t) >= quietFor {
				delete(w.warned, k)
			}
		}
	}
	if _, ok := w.warned[why]; !ok && len(w.warned) >= episodes {
		return false
	}
	w.warned[why] = at
	return true
}

// impersonation is why h, heard on the servers' port, is a message under
// id's DUID its client did not send and that may move the server's binding
// ("": none). ours: h is a message the client sent (Elapsed Time aside). A
// Solicit commits nothing (and confirmers send them under the same DUID)
// unless it asks for Rapid Commit, which the client never does; the client
// never releases or declines, whatever the transaction ID; a Request,
// Renew or Rebind it did not send matters when it names for id's IA_PD
// anything but the prefix held - another node's client taking the role
// over asks for the same - or hints lifetimes for it, which no agent's
// client does (ISC dhcpd takes a shorter valid lifetime hinted when it is
// not configured with its own, read in its source, not tried: a hint of
// 1 s would expire the binding).
func impersonation(h overheard, id Identity, ours bool, held netip.Prefix) string {
	if h.Client == nil || !bytes.Equal(h.Client, id.DUID.ToBytes()) {
		return ""
	}
	in := ""
	if h.Relayed {
		in = " in a Relay-Forward"
	}
	switch h.Type {
	case dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		return fmt.Sprintf("a %s%s of %s the client never sends", h.Type, in, named(h))
	case dhcpv6.MessageTypeSolicit:
		if h.Rapid && !ours {
			return fmt.Sprintf("a Solicit with Rapid Commit%s for %s the client never sends", in, named(h))
		}
		return ""
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind:
	default:
		return ""
	}
	if ours || !held.IsValid() || !h.IAPD {
		return ""
	}
	if h.Any || slices.ContainsFunc(h.Named, func(p netip.Prefix) bool { return p != held }) {
		return fmt.Sprintf("a %s%s for %s, %s held", h.Type, in, named(h), held)
	}
	if h.Hinted {
		return fmt.Sprintf("a %s%s for %s hinting lifetimes the client never asks for", h.Type, in, held)
	}
	return ""
}

// partImpersonation is why the first fragment b of a datagram to the
// servers' port, read as h, may be a message under id's DUID moving the
// server's binding ("": none). The client never sends a fragment (its
// messages fit any link's MTU), and what follows the first is not read, so
// it is judged by what it shows: nothing when it is no client message or
// Relay-Forward, or one that cannot move a binding, or one whose first
// Client Identifier (whole in b) is another's; an impersonation otherwise -
// under the client's DUID, or under one the rest may carry.
func partImpersonation(b []byte, h overheard, id Identity) string {
	if len(b) == 0 {
		return "a fragmented datagram whose message the first fragment does not show"
	}
	switch t := dhcpv6.MessageType(b[0]); t {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind,
		dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline, dhcpv6.MessageTypeRelayForward:
		if h.Client != nil && !bytes.Equal(h.Client, id.DUID.ToBytes()) {
			return ""
		}
		if h.Client == nil {
			return fmt.Sprintf("a fragmented %s whose client the first fragment does not show", t)
		}
		return fmt.Sprintf("a fragmented %s under the client's DUID", h.Type)
	}
	return ""
}

// named is what h's IA_PD names, for a log line.
func named(h overheard) string {
	switch {
	case !h.IAPD:
		return "no IA_PD of the client's"
	case h.Any:
		return "any prefix"
	}
	return fmt.Sprint(h.Named)
}

// dropCounter is a listener that counts the packets its queue dropped
// unread since it was last asked (packetConn).
type dropCounter interface {
	Dropped() (int, error)
}

// Run reads conn (ListenServers: IPv6 packets) until ctx ends or the
// socket fails. One buffer the size of the largest IPv6 packet but a
// jumbogram: a datagram a server reads whole is read whole. After each
// packet it asks a dropCounter what the queue dropped (one getsockopt: a
// drop is told with the next packet read, and a flood that drops has a
// next packet), so a Release lost in a flood is at least known missed.
func (w *Watch) Run(ctx context.Context, conn Conn, clk clock.PassiveClock) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	counter, _ := conn.(dropCounter)
	buf := make([]byte, 40+0xffff)
	for ctx.Err() == nil {
		n, _, err := conn.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("dhcp6: listening on the link for client messages: %w", err)
		}
		now := clk.Now()
		w.HeardPacket(buf[:n], now)
		if counter == nil {
			continue
		}
		if dropped, err := counter.Dropped(); err == nil && dropped > 0 {
			w.missed(dropped, now)
		}
	}
	return ctx.Err()
}

// missedKind is the episode (Watch.warn) of packets dropped unread: no
// impersonation's why reads so.
const missedKind = "dropped unread"

// missed logs (once an episode) and tells Missed of n packets the
// listener's queue dropped unread at.
func (w *Watch) missed(n int, at time.Time) {
	w.mu.Lock()
	log := w.warn(missedKind, at)
	w.mu.Unlock()
	if log {
		w.Log.Warn("DHCPv6: client messages on the link came faster than the agent reads them and some were dropped unheard; a host speaking to the server as this client among them goes unreported (the server's NoBinding at the client's next Renew still is)",
			"link", w.Link, "dropped", n)
	}
	if w.Missed != nil {
		w.Missed(n, at)
	}
}
