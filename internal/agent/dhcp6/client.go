// Package dhcp6 is the agent's built-in DHCPv6 prefix-delegation client (RFC
// 8415): for one DynamicPrefix it asks the link's DHCPv6 server for one
// delegated prefix (IA_PD), renews it at T1, rebinds at T2, solicits anew when
// the server answers NoBinding or the lease runs out, and never releases it: a
// restarted agent, or the agent on another node after a failover, asks with the
// same identity and gets the same prefix back.
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
}

// errNoBinding: the server no longer knows the lease; solicit anew.
var errNoBinding = errors.New("dhcp6: server has no binding")

// errUntrusted: a message from a server not in Servers.
var errUntrusted = errors.New("dhcp6: not a trusted server")

// errContradicted: answers about the lease disagree; it is kept as it was.
var errContradicted = errors.New("dhcp6: answers about the delegation contradict each other")

// confirmWindow is how long a changed answer waits for a contradiction: the
// first retransmission time of a Solicit (RFC 8415 7.6), the time a client
// gives servers to answer.
var confirmWindow = solicitRT[0]

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
		err = c.keep(ctx, &exchanger{conn: conn, server: server, id: c.ID, clock: c.Clock}, &s)
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
	lease *Lease       // the lease being kept (nil: acquiring)
	held  netip.Prefix // the prefix reported (it outlives a lease the server forgot)
}

// keep runs the lease cycle on one socket: acquire, renew, rebind, expire.
// It returns when ctx ends or the socket fails.
func (c *Client) keep(ctx context.Context, x *exchanger, s *session) error {
	failures := backoff.New(solicitRT[0], solicitRT[1])
	for ctx.Err() == nil {
		if s.lease == nil {
			l, err := c.acquire(ctx, x)
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, errSocket):
				return err
			case err != nil:
				c.Log.Debug("DHCPv6 acquisition failed", "link", c.Link, "err", err)
				backoff.Sleep(ctx, c.Clock, failures.Next())
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
			c.Log.Info("DHCPv6 server lost the delegation; soliciting anew", "link", c.Link, "prefix", s.lease.Prefix)
			s.lease = nil
		case errors.Is(err, errContradicted):
			c.Log.Warn("DHCPv6 answers contradict each other (another host answers as the server?); keeping the delegation", "link", c.Link, "prefix", s.lease.Prefix, "err", err)
			backoff.Sleep(ctx, c.Clock, failures.Next())
		case err != nil:
			// Neither renewed nor rebound before the valid lifetime ended.
			c.Log.Warn("DHCPv6 delegation expired", "link", c.Link, "prefix", s.lease.Prefix, "err", err)
			c.Report(s.lease.Prefix, 0, true, c.Clock.Now())
			s.lease, s.held = nil, netip.Prefix{}
		default:
			c.bound(s, l)
		}
	}
	return ctx.Err()
}

// bound reports a lease; a prefix replacing the one held ends that one.
func (c *Client) bound(s *session, l *Lease) {
	if s.held.IsValid() && s.held != l.Prefix {
		c.Report(s.held, 0, true, l.At)
	}
	if s.held != l.Prefix {
		c.Log.Debug("DHCPv6 delegation bound", "link", c.Link, "prefix", l.Prefix, "valid", l.Valid, "renew", l.T1)
	}
	c.Report(l.Prefix, l.Valid, false, l.At)
	s.lease, s.held = l, l.Prefix
}

// acquire solicits and requests a delegation.
func (c *Client) acquire(ctx context.Context, x *exchanger) (*Lease, error) {
	offered, err := c.solicit(ctx, x)
	if err != nil {
		return nil, err
	}
	req := x.message(dhcpv6.MessageTypeRequest, offered.Server, c.iapd(offered.Prefix))
	reply, err := x.exchange(ctx, req, dhcpv6.MessageTypeReply, requestRT, requestMaxRC, time.Time{}, c.fromTrusted)
	if err != nil {
		return nil, err
	}
	return c.offer(reply, c.Clock.Now())
}

// advert is an Advertise's offer and its server's Preference.
type advert struct {
	lease      *Lease
	preference uint8
}

// solicit collects Advertises for the first retransmission time and takes the
// most preferred (RFC 8415 18.2.9): one with preference 255 at once, else the
// highest at the end of that time, the first received among equals; when none
// came by then, the first that comes.
func (c *Client) solicit(ctx context.Context, x *exchanger) (*Lease, error) {
	sol := x.message(dhcpv6.MessageTypeSolicit, nil, c.iapd(netip.PrefixFrom(netip.IPv6Unspecified(), c.Length)))
	var offers []advert
	_, err := x.exchange(ctx, sol, dhcpv6.MessageTypeAdvertise, solicitRT, 1, c.Clock.Now().Add(solicitRT[0]), func(m *dhcpv6.Message) error {
		l, err := c.offer(m, c.Clock.Now())
		if err != nil {
			return err // an Advertise without a prefix is no offer
		}
		if len(offers) < maxCollected {
			offers = append(offers, advert{l, m.Options.Preference()})
		}
		if m.Options.Preference() == 255 {
			return nil
		}
		return errCollecting
	})
	switch {
	case len(offers) > 0:
		return best(offers), nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, errSocket):
		return nil, err
	}
	adv, err := x.exchange(ctx, sol, dhcpv6.MessageTypeAdvertise, solicitRT, 0, time.Time{}, func(m *dhcpv6.Message) error {
		_, err := c.offer(m, c.Clock.Now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.offer(adv, c.Clock.Now())
}

// best is the most preferred offer, the first received among equals.
func best(offers []advert) *Lease {
	top := offers[0]
	for _, o := range offers[1:] {
		if o.preference > top.preference {
			top = o
		}
	}
	return top.lease
}

// extend renews the lease at T1 with its server and, from T2, rebinds with
// any server, until its valid lifetime ends.
func (c *Client) extend(ctx context.Context, x *exchanger, l *Lease) (*Lease, error) {
	t1, t2, end := l.At.Add(l.T1), l.At.Add(l.T2), l.At.Add(l.Valid)
	if !backoff.Sleep(ctx, c.Clock, t1.Sub(c.Clock.Now())) {
		return nil, ctx.Err()
	}
	accept := func(m *dhcpv6.Message) error {
		_, err := c.offer(m, c.Clock.Now())
		if errors.Is(err, errNoBinding) {
			return nil // an answer all the same
		}
		return err
	}
	kind, server := dhcpv6.MessageTypeRenew, l.Server
	reply, err := x.exchange(ctx, x.message(kind, server, c.iapd(l.Prefix)), dhcpv6.MessageTypeReply, renewRT, 0, t2, accept)
	if err != nil && ctx.Err() == nil {
		kind, server = dhcpv6.MessageTypeRebind, nil
		reply, err = x.exchange(ctx, x.message(kind, server, c.iapd(l.Prefix)), dhcpv6.MessageTypeReply, renewRT, 0, end, accept)
	}
	if err != nil {
		return nil, err
	}
	next, err := c.offer(reply, c.Clock.Now())
	if (err == nil && next.Prefix == l.Prefix) || (err != nil && !errors.Is(err, errNoBinding)) {
		return next, err
	}
	return c.confirm(ctx, x, l, kind, server, next, err)
}

// confirm asks again, as the answer that changed the lease was asked for (a
// Renew to its server, or a Rebind to any), and takes the change - another
// prefix, or NoBinding - only if every answer within confirmWindow says the
// same. A changed answer outside a new Solicit is what any host that saw the
// multicast transaction can forge; the real server's word that the lease
// stands contradicts it, and the lease is kept (errContradicted).
func (c *Client) confirm(ctx context.Context, x *exchanger, l *Lease, kind dhcpv6.MessageType, server dhcpv6.DUID, claimed *Lease, claim error) (*Lease, error) {
	says := func(m *dhcpv6.Message) string {
		o, err := c.offer(m, c.Clock.Now())
		switch {
		case errors.Is(err, errNoBinding):
			return "no binding"
		case err != nil:
			return ""
		}
		return o.Prefix.String()
	}
	want := "no binding"
	if claim == nil {
		want = claimed.Prefix.String()
	}
	answers, err := x.collect(ctx, x.message(kind, server, c.iapd(l.Prefix)), dhcpv6.MessageTypeReply, confirmWindow, func(m *dhcpv6.Message) error {
		if says(m) == "" {
			return errNoAnswer
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(answers) == 0 {
		return nil, fmt.Errorf("%w: nobody confirmed %s", errContradicted, want)
	}
	for _, a := range answers {
		if got := says(a); got != want {
			return nil, fmt.Errorf("%w: %s, then %s", errContradicted, want, got)
		}
	}
	if claim != nil {
		return nil, claim
	}
	return c.offer(answers[len(answers)-1], c.Clock.Now())
}

// iapd is the IA_PD option asking for p (the unspecified prefix: any prefix
// of that length).
func (c *Client) iapd(p netip.Prefix) dhcpv6.Option {
	o := &dhcpv6.OptIAPD{IaId: c.ID.IAID}
	o.Options.Add(&dhcpv6.OptIAPrefix{Prefix: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}})
	return o
}

// offer reads the delegation a server's Advertise or Reply offers: the
// first prefix of our IA_PD with a valid lifetime left.
func (c *Client) offer(m *dhcpv6.Message, at time.Time) (*Lease, error) {
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
			return nil, fmt.Errorf("dhcp6: IA_PD: %s: %s", s.StatusCode, s.StatusMessage)
		}
		for _, o := range ia.Options.Prefixes() {
			p, ok := prefixOf(o.Prefix)
			if !ok || o.ValidLifetime <= 0 || o.PreferredLifetime > o.ValidLifetime {
				continue // withdrawn (valid 0), or invalid (RFC 8415 21.22)
			}
			l := &Lease{Prefix: p, Preferred: o.PreferredLifetime, Valid: o.ValidLifetime, T1: ia.T1, T2: ia.T2, Server: server, At: at}
			l.times()
			return l, nil
		}
	}
	return nil, errors.New("dhcp6: no prefix delegated")
}

// fromTrusted refuses a message from a server not trusted (or from none).
func (c *Client) fromTrusted(m *dhcpv6.Message) error {
	server := m.Options.ServerID()
	if server == nil || !c.trusts(server) {
		return errUntrusted
	}
	return nil
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
