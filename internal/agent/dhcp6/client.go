// Package dhcp6 is the agent's built-in DHCPv6 prefix-delegation client (RFC
// 8415): for one DynamicPrefix it asks the link's DHCPv6 server for one
// delegated prefix (IA_PD), renews it at T1, rebinds at T2, solicits anew when
// the server answers NoBinding or the lease runs out, and never releases it: a
// restarted agent, or the agent on another node after a failover, asks with the
// same identity and gets the same prefix back.
//
// Any host on the link can answer, under any DUID (answer.go): an answer is
// believed only when no other answer to the same transmission under the same
// DUID contradicts it within collectWindow; a contradiction moves nothing
// and is reported (Client.Conflict).
//
// Messages are encoded and decoded by github.com/insomniacslk/dhcp; the
// exchanges (what to send when, and what a reply means) are written here,
// because that library's client assumes a server that also assigns addresses.
package dhcp6

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/backoff"
)

// Identity is what the server knows the client by. Derived from the
// DynamicPrefix, never from the node: every node asks as the same client.
type Identity struct {
	DUID dhcpv6.DUID
	IAID [4]byte
}

// IdentityFor is the identity of the client of the DynamicPrefix with this
// UID and name: a DUID-UUID (RFC 6355) holding the UID, and an IAID hashed
// from the name. A DynamicPrefix deleted and created again has a new UID, so
// it asks as a new client.
func IdentityFor(uid, name string) (Identity, error) {
	u, err := parseUUID(uid)
	if err != nil {
		return Identity{}, err
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	var id Identity
	id.DUID = &dhcpv6.DUIDUUID{UUID: u}
	copy(id.IAID[:], h.Sum(nil))
	return id, nil
}

func parseUUID(s string) ([16]byte, error) {
	var u [16]byte
	hex := make([]byte, 0, 32)
	for i := 0; i < len(s); i++ {
		if s[i] != '-' {
			hex = append(hex, s[i])
		}
	}
	if len(hex) != 32 {
		return u, fmt.Errorf("dhcp6: UID %q is not a UUID", s)
	}
	for i := range u {
		hi, ok1 := nibble(hex[2*i])
		lo, ok2 := nibble(hex[2*i+1])
		if !ok1 || !ok2 {
			return u, fmt.Errorf("dhcp6: UID %q is not a UUID", s)
		}
		u[i] = hi<<4 | lo
	}
	return u, nil
}

func nibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Conn is what the client needs of its UDP socket (a *net.UDPConn has it).
type Conn interface {
	WriteTo(b []byte, addr net.Addr) (int, error)
	ReadFrom(b []byte) (int, net.Addr, error)
	SetReadDeadline(t time.Time) error
	Close() error
}

// Lease is a delegation held.
type Lease struct {
	Prefix           netip.Prefix
	Preferred, Valid time.Duration
	T1, T2           time.Duration
	Server           dhcpv6.DUID
	At               time.Time // when the reply came
}

// Retransmission parameters (RFC 8415 7.6): initial and maximum timeout, and
// for a Request the most transmissions. Solicits are capped at two minutes
// instead of an hour, so a router back from a reboot is asked soon.
var (
	solicitRT = [2]time.Duration{time.Second, 2 * time.Minute}
	requestRT = [2]time.Duration{time.Second, 30 * time.Second}
	renewRT   = [2]time.Duration{10 * time.Second, 10 * time.Minute}
)

const requestMaxRC = 10

// Client asks for and keeps one delegation.
type Client struct {
	Link   string
	Length int // the prefix length asked for (a hint to the server)
	ID     Identity
	Clock  clock.Clock
	Log    *slog.Logger
	// Dial opens the socket and names where messages go (the link's
	// All_DHCP_Relay_Agents_and_Servers address, port 547).
	Dial func() (Conn, net.Addr, error)
	// Report is called when a delegation is bound or renewed (removed false,
	// valid: its valid lifetime) and when it ends (removed true).
	Report func(p netip.Prefix, valid time.Duration, removed bool, at time.Time)
	// Servers are the DUIDs of the only servers whose messages count
	// (spec.acquisition.dhcpv6pd.trustedServers; empty: any server).
	Servers [][]byte
	// Conflict, when set, is called each time answers from one server's
	// DUID to one transmission disagreed: another host answers as the
	// server. Nothing they said was believed.
	Conflict func(at time.Time)
	// Dropped, when set, is called each time the server answered NoBinding
	// for a delegation the client holds with valid lifetime left (dropped).
	Dropped func(at time.Time)
	// Watch, when set, is told the client's transactions and the prefix it
	// holds, to judge the client messages heard on the link (overhear.go).
	Watch *Watch

	trace      func(Lease)    // tests: every lease taken
	jitter     func() float64 // tests: the retransmissions' jitter (nil: random)
	conflicted bool           // the last answers judged disagreed (logged once)
}

// errNoBinding: the server no longer knows the lease; solicit anew.
var errNoBinding = errors.New("dhcp6: server has no binding")

// errNoPrefixAvail: the server has nothing to delegate. It still speaks: a
// rogue offering beside it is one of two speakers (tally.offerers).
var errNoPrefixAvail = errors.New("dhcp6: server has no prefix available")

// errUntrusted: a message from a server not in Servers.
var errUntrusted = errors.New("dhcp6: not a trusted server")

// Run keeps a delegation until ctx ends and returns the prefix held then
// (invalid if none). It never releases it.
func (c *Client) Run(ctx context.Context) netip.Prefix {
	var s session
	dialBackoff := backoff.New(time.Second, time.Minute)
	var failing string // the socket error logged last: one line per new reason
	for ctx.Err() == nil {
		conn, server, err := c.Dial()
		if err != nil {
			if err.Error() != failing {
				failing = err.Error()
				c.Log.Warn("DHCPv6 client cannot open its socket; retrying", "link", c.Link, "err", err)
			}
			backoff.Sleep(ctx, c.Clock, dialBackoff.Next())
			continue
		}
		failing = ""
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		err = c.keep(ctx, &exchanger{conn: conn, server: server, id: c.ID, clock: c.Clock, contradicted: c.contradicted, jitter: c.jitter, sending: c.Watch.sending}, &s)
		stop()
		conn.Close()
		if ctx.Err() == nil {
			c.Log.Warn("DHCPv6 client socket failed; opening a new one", "link", c.Link, "err", err)
			backoff.Sleep(ctx, c.Clock, dialBackoff.Next())
		}
	}
	return s.held
}

// session is the client's state across sockets.
type session struct {
	lease *Lease // the lease being kept (nil: acquiring)
	// held is the prefix reported, until heldUntil: it outlives a lease the
	// server forgot, to the end of the valid lifetime the server stated.
	held      netip.Prefix
	heldUntil time.Time
}

// keep runs the lease cycle on one socket: acquire, renew, rebind, expire.
// It returns when ctx ends or the socket fails.
func (c *Client) keep(ctx context.Context, x *exchanger, s *session) error {
	failures := backoff.NewWith(solicitRT[0], solicitRT[1], c.jitter)
	for ctx.Err() == nil {
		if s.lease == nil {
			c.expire(s)
			l, err := c.acquire(ctx, x, s.heldEnd())
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, errSocket):
				return err
			case err != nil:
				c.Log.Debug("DHCPv6 acquisition failed", "link", c.Link, "err", err)
				d := failures.Next()
				if end := s.heldEnd(); !end.IsZero() {
					d = min(d, end.Sub(c.Clock.Now()))
				}
				backoff.Sleep(ctx, c.Clock, d)
			default:
				failures.Reset()
				c.bound(s, l)
			}
			continue
		}
		l, err := c.extend(ctx, x, s.lease)
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errSocket):
			return err
		case errors.Is(err, errNoBinding):
			c.dropped(s)
			s.lease = nil
		case err != nil:
			// Neither renewed nor rebound before the valid lifetime ended.
			c.Log.Warn("DHCPv6 delegation expired", "link", c.Link, "prefix", s.lease.Prefix, "err", err)
			c.Report(s.lease.Prefix, 0, true, c.Clock.Now())
			s.lease, s.held = nil, netip.Prefix{}
			c.Watch.holding(s.held)
		default:
			c.bound(s, l)
		}
	}
	return ctx.Err()
}

// dropped: the server answered NoBinding for the lease being kept, which
// the client never released. A server that renumbers says so in a Reply;
// one that forgets a valid binding was made to (a Release in the client's
// name, sent where the Watch cannot hear it: unicast to the server, or
// through a relay) or lost its leases. The client follows the server -
// it solicits anew, and keeps the prefix only to the end of the valid
// lifetime the server stated - and reports the suspicion (Dropped).
func (c *Client) dropped(s *session) {
	now := c.Clock.Now()
	if !now.Before(s.heldUntil) {
		c.Log.Info("DHCPv6 server lost the delegation; soliciting anew", "link", c.Link, "prefix", s.lease.Prefix)
		return
	}
	c.Log.Warn("DHCPv6 server dropped a delegation the client never released, with valid lifetime left: a host may have released it in the client's name (where this node did not hear it: unicast, relayed from another link, to a group the link does not bring here, or lost in a flood), or the server lost its leases; soliciting anew",
		"link", c.Link, "prefix", s.lease.Prefix, "validLeft", s.heldUntil.Sub(now).Round(time.Second))
	if c.Dropped != nil {
		c.Dropped(now)
	}
}

// heldEnd is when the prefix held without a lease ends (zero: none held).
func (s *session) heldEnd() time.Time {
	if s.lease != nil || !s.held.IsValid() {
		return time.Time{}
	}
	return s.heldUntil
}

// expire ends a prefix held without a lease once its valid lifetime is over.
func (c *Client) expire(s *session) {
	if end := s.heldEnd(); !end.IsZero() && !c.Clock.Now().Before(end) {
		c.Log.Warn("DHCPv6 delegation expired", "link", c.Link, "prefix", s.held)
		c.Report(s.held, 0, true, c.Clock.Now())
		s.held = netip.Prefix{}
		c.Watch.holding(s.held)
	}
}

// bound reports a lease; a prefix replacing the one held ends that one.
func (c *Client) bound(s *session, l *Lease) {
	if s.held.IsValid() && s.held != l.Prefix {
		c.Report(s.held, 0, true, l.At)
	}
	if s.held != l.Prefix {
		c.Log.Debug("DHCPv6 delegation bound", "link", c.Link, "prefix", l.Prefix, "valid", l.Valid, "renew", l.T1)
	}
	if c.conflicted {
		c.conflicted = false
		c.Log.Info("DHCPv6 answers from the server agree again", "link", c.Link, "prefix", l.Prefix)
	}
	if c.trace != nil {
		c.trace(*l)
	}
	c.Report(l.Prefix, l.Valid, false, l.At)
	s.lease, s.held, s.heldUntil = l, l.Prefix, l.At.Add(l.Valid)
	c.Watch.holding(s.held)
}

// contradicted: answers under one server's DUID disagreed; none was taken.
func (c *Client) contradicted(servers []dhcpv6.DUID) {
	c.conflict("DHCPv6 answers from one server contradict each other: another host answers as the server; believing neither", servers)
}

// disagree: servers under different DUIDs offered delegations to one
// transmission; none was taken. The log names them, so that the admin can
// pin the real one (trustedServers).
func (c *Client) disagree(servers []dhcpv6.DUID) {
	c.conflict("DHCPv6 servers under different DUIDs offer delegations: two speakers the client cannot tell apart; believing neither (pin the real one in trustedServers)", servers)
}

// conflict logs why nothing was believed, once until answers agree again,
// and reports it each time.
func (c *Client) conflict(why string, servers []dhcpv6.DUID) {
	if !c.conflicted {
		c.conflicted = true
		ids := make([]string, len(servers))
		for i, s := range servers {
			ids[i] = fmt.Sprintf("%x", s.ToBytes())
		}
		c.Log.Warn(why, "link", c.Link, "servers", ids)
	}
	if c.Conflict != nil {
		c.Conflict(c.Clock.Now())
	}
}

// hear reads an answer from a trusted server (named, when not nil: that one
// alone, as a Request and a Renew ask).
func (c *Client) hear(named dhcpv6.DUID) func(*dhcpv6.Message) (answer, bool) {
	return func(m *dhcpv6.Message) (answer, bool) {
		server := m.Options.ServerID()
		if server == nil || !c.trusts(server) || (named != nil && !server.Equal(named)) {
			return answer{}, false
		}
		l, err := c.offer(m, c.Clock.Now())
		return answer{server: server, lease: l, refusal: err, preference: m.Options.Preference()}, true
	}
}

// acquire solicits and requests a delegation, giving up at until (zero:
// never) for the prefix held then to end. Answers are heard out no later
// than until either: a window running past it kept the prefix reported
// beyond the valid lifetime the server stated (by up to collectWindow).
// until is also the deadline of the Prober's probe (probeFor, or its
// offer's end), where the same holds.
func (c *Client) acquire(ctx context.Context, x *exchanger, until time.Time) (*Lease, error) {
	offered, err := c.solicit(ctx, x, until)
	if err != nil {
		return nil, err
	}
	var got *Lease
	var refused error
	req := x.message(dhcpv6.MessageTypeRequest, offered.Server, c.iapd(offered.Prefix))
	err = x.ask(ctx, req, dhcpv6.MessageTypeReply, requestRT, requestMaxRC, until, until, c.hear(offered.Server), func(t *tally) bool {
		for _, a := range t.believed() {
			got, refused = a.lease, a.refusal
			return true
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	return got, refused
}

// solicit takes the most preferred offer (RFC 8415 18.2.9) heard to one
// Solicit: Advertises are collected for collectWindow after the first, even
// one with Preference 255, because any host can send one with the DUID of
// the server trusted.
func (c *Client) solicit(ctx context.Context, x *exchanger, until time.Time) (*Lease, error) {
	sol := x.message(dhcpv6.MessageTypeSolicit, nil, c.iapd(netip.PrefixFrom(netip.IPv6Unspecified(), c.Length)))
	var offered *Lease
	err := x.ask(ctx, sol, dhcpv6.MessageTypeAdvertise, solicitRT, 0, until, until, c.hear(nil), func(t *tally) bool {
		if s := t.offerers(); len(s) > 1 {
			c.disagree(s)
			return false
		}
		offered = best(t.believed())
		return offered != nil
	})
	return offered, err
}

// best is the most preferred offer, the first heard among equals (nil: none).
func best(answers []answer) *Lease {
	var top *answer
	for i, a := range answers {
		if a.lease != nil && (top == nil || a.preference > top.preference) {
			top = &answers[i]
		}
	}
	if top == nil {
		return nil
	}
	return top.lease
}

// extend renews the lease at T1 with its server and, from T2, rebinds with
// any server, until its valid lifetime ends. Only answers no other from the
// same server contradicts are taken: another prefix, NoBinding, a shorter or
// a longer lifetime alike.
func (c *Client) extend(ctx context.Context, x *exchanger, l *Lease) (*Lease, error) {
	t1, t2, end := l.At.Add(l.T1), l.At.Add(l.T2), l.At.Add(l.Valid)
	if !backoff.Sleep(ctx, c.Clock, t1.Sub(c.Clock.Now())) {
		return nil, ctx.Err()
	}
	var next *Lease
	var refused error
	// The lease's server's answer beats another's; among others, a
	// delegation beats a refusal, and two servers' delegations disagree.
	judge := func(t *tally) bool {
		next, refused = nil, nil
		answers := t.believed()
		if t.answered(l.Server) {
			// The lease's server answered a Rebind (or a host under its
			// DUID did): another's delegation would be a second speaker's
			// word against it.
			answers = slices.DeleteFunc(answers, func(a answer) bool { return !a.server.Equal(l.Server) })
		} else if s := t.offerers(); len(s) > 1 {
			c.disagree(s)
			return false
		}
		for _, a := range answers {
			switch {
			case a.lease != nil && (next == nil || a.server.Equal(l.Server)):
				next = a.lease
			case errors.Is(a.refusal, errNoBinding):
				refused = errNoBinding
			}
		}
		if next != nil {
			refused = nil
		}
		return next != nil || refused != nil
	}
	err := x.ask(ctx, x.message(dhcpv6.MessageTypeRenew, l.Server, c.iapd(l.Prefix)), dhcpv6.MessageTypeReply, renewRT, 0, t2, end, c.hear(l.Server), judge)
	if err != nil && ctx.Err() == nil && !errors.Is(err, errSocket) {
		err = x.ask(ctx, x.message(dhcpv6.MessageTypeRebind, nil, c.iapd(l.Prefix)), dhcpv6.MessageTypeReply, renewRT, 0, end, end, c.hear(nil), judge)
	}
	if err != nil {
		return nil, err
	}
	return next, refused
}

// iapd is the IA_PD option asking for p (the unspecified prefix: any prefix
// of that length).
func (c *Client) iapd(p netip.Prefix) dhcpv6.Option {
	o := &dhcpv6.OptIAPD{IaId: c.ID.IAID}
	o.Options.Add(&dhcpv6.OptIAPrefix{Prefix: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}})
	return o
}

// offer reads the delegation a server's Advertise or Reply offers: the
// first prefix of our IA_PD still preferred, else the first with a valid
// lifetime left.
func (c *Client) offer(m *dhcpv6.Message, at time.Time) (*Lease, error) {
	if s := m.Options.Status(); s != nil && s.StatusCode == iana.StatusNoPrefixAvail {
		return nil, fmt.Errorf("%w: %s", errNoPrefixAvail, s.StatusMessage)
	}
	if s := m.Options.Status(); s != nil && s.StatusCode != iana.StatusSuccess {
		return nil, fmt.Errorf("dhcp6: server says %s: %s", s.StatusCode, s.StatusMessage)
	}
	server := m.Options.ServerID()
	if server == nil {
		return nil, errors.New("dhcp6: message without a server identifier")
	}
	if !c.trusts(server) {
		return nil, fmt.Errorf("%w: %x", errUntrusted, server.ToBytes())
	}
	for _, ia := range m.Options.IAPD() {
		if ia.IaId != c.ID.IAID {
			continue
		}
		if s := ia.Options.Status(); s != nil && s.StatusCode != iana.StatusSuccess {
			if s.StatusCode == iana.StatusNoBinding {
				return nil, errNoBinding
			}
			if s.StatusCode == iana.StatusNoPrefixAvail {
				return nil, fmt.Errorf("%w: %s", errNoPrefixAvail, s.StatusMessage)
			}
			return nil, fmt.Errorf("dhcp6: IA_PD: %s: %s", s.StatusCode, s.StatusMessage)
		}
		// A preferred prefix first: a server renumbering gracefully (RFC
		// 8415 18.3.4) may list the old one deprecated before the new one,
		// and taking the first valid one kept the old for its valid lifetime.
		var deprecated *Lease
		for _, o := range ia.Options.Prefixes() {
			p, ok := prefixOf(o.Prefix)
			if !ok || o.ValidLifetime <= 0 || o.PreferredLifetime > o.ValidLifetime {
				continue // withdrawn (valid 0), or invalid (RFC 8415 21.22)
			}
			l := &Lease{Prefix: p, Preferred: o.PreferredLifetime, Valid: o.ValidLifetime, T1: ia.T1, T2: ia.T2, Server: server, At: at}
			l.times()
			if o.PreferredLifetime > 0 {
				return l, nil
			}
			if deprecated == nil {
				deprecated = l
			}
		}
		if deprecated != nil {
			return deprecated, nil
		}
	}
	return nil, errors.New("dhcp6: no prefix delegated")
}

// trusts reports whether messages from server count.
func (c *Client) trusts(server dhcpv6.DUID) bool {
	if len(c.Servers) == 0 {
		return true
	}
	b := server.ToBytes()
	return slices.ContainsFunc(c.Servers, func(s []byte) bool { return bytes.Equal(s, b) })
}

// times fills T1 and T2 the server left to the client (RFC 8415 21.21: 0.5
// and 0.8 times the preferred lifetime) and keeps T1 <= T2 <= valid.
func (l *Lease) times() {
	if l.T1 <= 0 || l.T1 > l.Valid {
		l.T1 = l.Preferred / 2
	}
	if l.T2 <= 0 || l.T2 > l.Valid {
		l.T2 = l.Preferred * 4 / 5
	}
	l.T1 = max(l.T1, time.Second)
	l.T2 = max(l.T2, l.T1)
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	ones, bits := n.Mask.Size()
	if !ok || bits != 128 || !a.Is6() || a.Is4In6() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones).Masked(), true
}
