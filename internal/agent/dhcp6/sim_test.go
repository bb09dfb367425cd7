package dhcp6

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	clocktesting "k8s.io/utils/clock/testing"
)

// A simulated link for the model tests: a deterministic clock, a conforming
// DHCPv6 server (RFC 8415 timings: it answers every message within its
// delay; it can renumber) and an adversary that may send anything at any
// time, the server's DUID included - but cannot silence the server. The
// link delivers in time order; the clock moves only when the client waits.

// realServer is the conforming server.
type realServer struct {
	duid             dhcpv6.DUID
	prefix           netip.Prefix // the delegation it binds now (invalid: it refuses, NoPrefixAvail)
	preferred, valid time.Duration
	t1, t2           time.Duration
	preference       uint8
	noBinding        bool // after a renumbering: NoBinding for the old prefix (else: the new one, the old at lifetime 0)
	// graceful: after a renumbering without noBinding, the old prefix is
	// listed first, deprecated, its valid lifetime left at half the
	// lease's (RFC 8415 18.3.4), then the new one.
	graceful            bool
	delay               func() time.Duration
	answered, solicited int
}

// answer is the server's answer to m (nil: none).
func (s *realServer) answer(m *dhcpv6.Message) *dhcpv6.Message {
	if sid := m.Options.ServerID(); m.MessageType != dhcpv6.MessageTypeSolicit && m.MessageType != dhcpv6.MessageTypeRebind &&
		(sid == nil || !sid.Equal(s.duid)) {
		return nil // a Request or Renew for another server
	}
	ia := m.Options.OneIAPD()
	if ia == nil {
		return nil
	}
	a := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: m.TransactionID}
	a.AddOption(dhcpv6.OptClientID(m.Options.ClientID()))
	a.AddOption(dhcpv6.OptServerID(s.duid))
	out := &dhcpv6.OptIAPD{IaId: ia.IaId, T1: s.t1, T2: s.t2}
	var asked netip.Prefix
	if ps := ia.Options.Prefixes(); len(ps) > 0 {
		asked, _ = prefixOf(ps[0].Prefix)
	}
	switch m.MessageType {
	case dhcpv6.MessageTypeSolicit:
		a.MessageType = dhcpv6.MessageTypeAdvertise
		a.AddOption(dhcpv6.OptPreference(s.preference))
		s.solicited++
	case dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind:
		if asked != s.prefix && (s.noBinding || !s.prefix.IsValid()) {
			out.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoBinding})
			a.AddOption(out)
			return a
		}
		if asked != s.prefix && asked.IsValid() {
			if s.graceful {
				out.Options.Add(iaPrefix(asked, 0, s.valid/2))
			} else {
				out.Options.Add(iaPrefix(asked, 0, 0))
			}
		}
	}
	if !s.prefix.IsValid() {
		// Refusing: nothing to delegate (RFC 8415 18.3.9).
		out.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoPrefixAvail})
		a.AddOption(out)
		return a
	}
	out.Options.Add(iaPrefix(s.prefix, s.preferred, s.valid))
	a.AddOption(out)
	s.answered++
	return a
}

func iaPrefix(p netip.Prefix, preferred, valid time.Duration) *dhcpv6.OptIAPrefix {
	o := &dhcpv6.OptIAPrefix{PreferredLifetime: preferred, ValidLifetime: valid}
	if p.IsValid() {
		o.Prefix = &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}
	} else {
		o.Prefix = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	return o
}

// stated is the most the server said of a prefix in Replies the client
// received: absolute times, measured at receipt.
type stated struct{ preferred, valid, t1, t2 time.Time }

type delivery struct {
	at   time.Time
	seq  int
	msg  *dhcpv6.Message
	real bool
	// toServer: the adversary's client message, to the server: the server
	// acts on it (serverHears), and the client's node hears it
	// (overhear), but the client's socket does not.
	toServer bool
}

// simLink is the client's socket on the simulated link.
type simLink struct {
	t        testing.TB
	clk      *clocktesting.FakeClock
	server   *realServer
	queue    []delivery
	seq      int
	deadline time.Time
	horizon  time.Time // the run ends here
	end      context.CancelFunc
	sent     []*dhcpv6.Message
	sentAt   []time.Time
	// adversary is called on every message the client sends: it may schedule
	// anything (l.forge).
	adversary func(l *simLink, m *dhcpv6.Message)
	// step runs before each socket call: the properties are checked there.
	step func()
	// overhear is the client's node hearing a client message on the
	// servers' port (its client's own, looped back, included); serverHears
	// is the server acting on the adversary's client message.
	overhear    func(m *dhcpv6.Message) bool
	serverHears func(m *dhcpv6.Message, impersonation bool)
	// heard are the messages the link carried to the client, the last
	// maxHeard: what the adversary may replay.
	heard []*dhcpv6.Message

	stated map[netip.Prefix]stated
	// lastForged is when the last message carrying the server's DUID from
	// the adversary arrived (with anyServer: any server's DUID).
	lastForged time.Time
	// anyServer: the client trusts any server (no trustedServers), so
	// that a forger's own DUID is a second speaker too.
	anyServer bool
}

func newSimLink(t testing.TB, s *realServer) *simLink {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	return &simLink{t: t, clk: clk, server: s, stated: map[netip.Prefix]stated{}, horizon: clk.Now().Add(24 * time.Hour)}
}

func (l *simLink) schedule(at time.Time, m *dhcpv6.Message, real bool) {
	l.seq++
	d := delivery{at: at, seq: l.seq, msg: m, real: real}
	i, _ := slices.BinarySearchFunc(l.queue, d, func(a, b delivery) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	l.queue = slices.Insert(l.queue, i, d)
}

// forge schedules an adversary's message after delay.
func (l *simLink) forge(delay time.Duration, m *dhcpv6.Message) {
	l.schedule(l.clk.Now().Add(delay), m, false)
}

// speakAsClient schedules an adversary's client message to the server.
func (l *simLink) speakAsClient(delay time.Duration, m *dhcpv6.Message) {
	l.schedule(l.clk.Now().Add(delay), m, false)
	for i := range l.queue {
		if l.queue[i].seq == l.seq {
			l.queue[i].toServer = true
		}
	}
}

const maxHeard = 64

func (l *simLink) WriteTo(b []byte, _ net.Addr) (int, error) {
	l.check()
	m, err := dhcpv6.MessageFromBytes(b)
	if err != nil {
		l.t.Fatalf("the client sent garbage: %v", err)
	}
	l.sent, l.sentAt = append(l.sent, m), append(l.sentAt, l.clk.Now())
	if l.overhear != nil && l.overhear(m) {
		l.t.Fatalf("the client's own %s (transaction %x) reported as an impersonation", m.MessageType, m.TransactionID)
	}
	if a := l.server.answer(m); a != nil {
		l.schedule(l.clk.Now().Add(l.server.delay()), a, true)
	}
	if l.adversary != nil {
		l.adversary(l, m)
	}
	return len(b), nil
}

func (l *simLink) SetReadDeadline(t time.Time) error { l.deadline = t; return nil }
func (l *simLink) Close() error                      { return nil }

func (l *simLink) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, err, again := l.readOne(b)
		if !again {
			return n, nil, err
		}
	}
}

// readOne delivers the next message (again: it went to the server, read on).
func (l *simLink) readOne(b []byte) (int, error, bool) {
	l.check()
	if !l.clk.Now().Before(l.horizon) {
		l.end()
		return 0, net.ErrClosed, false
	}
	if len(l.queue) == 0 || l.queue[0].at.After(l.deadline) {
		to := l.deadline
		if to.After(l.horizon) {
			to = l.horizon
		}
		if to.After(l.clk.Now()) {
			l.clk.SetTime(to)
		}
		if to.Equal(l.horizon) {
			l.end()
			return 0, net.ErrClosed, false
		}
		return 0, os.ErrDeadlineExceeded, false
	}
	d := l.queue[0]
	l.queue = l.queue[1:]
	if d.at.After(l.clk.Now()) {
		l.clk.SetTime(d.at)
	}
	now := l.clk.Now()
	if d.toServer {
		heard := l.overhear != nil && l.overhear(d.msg)
		if l.serverHears != nil {
			l.serverHears(d.msg, heard)
		}
		return 0, nil, true
	}
	if len(l.heard) == maxHeard {
		l.heard = slices.Delete(l.heard, 0, 1)
	}
	l.heard = append(l.heard, d.msg)
	if sid := d.msg.Options.ServerID(); !d.real && sid != nil && (l.anyServer || sid.Equal(l.server.duid)) {
		l.lastForged = now
	}
	if d.real && d.msg.MessageType == dhcpv6.MessageTypeReply {
		for _, ia := range d.msg.Options.IAPD() {
			for _, o := range ia.Options.Prefixes() {
				p, ok := prefixOf(o.Prefix)
				if !ok || o.ValidLifetime <= 0 {
					continue
				}
				s := l.stated[p]
				later := func(t *time.Time, d time.Duration) {
					if at := now.Add(d); at.After(*t) {
						*t = at
					}
				}
				later(&s.preferred, o.PreferredLifetime)
				later(&s.valid, o.ValidLifetime)
				later(&s.t1, ia.T1)
				later(&s.t2, ia.T2)
				l.stated[p] = s
			}
		}
	}
	return copy(b, d.msg.ToBytes()), nil, false
}

func (l *simLink) check() {
	if l.step != nil {
		l.step()
	}
}

// simClock is the simulated link's clock for the client: a wait moves the
// time on by what it would have waited.
type simClock struct {
	*clocktesting.FakeClock
	l *simLink
}

func (c simClock) After(d time.Duration) <-chan time.Time {
	c.l.check()
	c.Step(max(d, 0))
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

func (c simClock) Sleep(d time.Duration) { c.After(d) }

// simRun is a client on a simulated link and what it reported.
type simRun struct {
	l         *simLink
	c         *Client
	held      netip.Prefix
	heldUntil time.Time
	reports   []simReport
	conflicts []time.Time
	leases    []Lease     // every lease the client took
	forged    []time.Time // the client's node heard another host speak as the client (Watch)
}

type simReport struct {
	At      time.Time
	Prefix  netip.Prefix
	Valid   time.Duration
	Removed bool
}

// newSimRun makes a client trusting the link's server only.
func newSimRun(t testing.TB, l *simLink) *simRun {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	r := &simRun{l: l}
	clk := simClock{l.clk, l}
	r.c = &Client{Link: "eth0", Length: 56, ID: id, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dial:    func() (Conn, net.Addr, error) { return l, &net.UDPAddr{IP: net.IPv6loopback, Port: ServerPort}, nil },
		Servers: [][]byte{l.server.duid.ToBytes()},
		Report: func(p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
			r.reports = append(r.reports, simReport{at, p, valid, removed})
			if removed {
				r.held = netip.Prefix{}
				return
			}
			r.held, r.heldUntil = p, at.Add(valid)
		},
		Conflict: func(at time.Time) { r.conflicts = append(r.conflicts, at) },
	}
	r.c.trace = func(l Lease) { r.leases = append(r.leases, l) }
	r.c.Watch = &Watch{ID: id, Link: "eth0", Log: r.c.Log, Impersonated: func(at time.Time) { r.forged = append(r.forged, at) }}
	l.overhear = func(m *dhcpv6.Message) bool { return r.c.Watch.Heard(m.ToBytes(), l.clk.Now()) }
	// Jitter from a fixed sequence: a run is repeatable.
	seq := 0
	r.c.jitter = func() float64 { seq++; return float64(seq*7919%1000) / 1000 }
	return r
}

// run runs the client until the link's horizon.
func (r *simRun) run(t testing.TB) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r.l.end = cancel
	if got := r.c.Run(ctx); got != r.held {
		t.Errorf("Run returned %s, the last report left %s held", got, r.held)
	}
}

// answerIn is a server delay.
func answerIn(d time.Duration) func() time.Duration { return func() time.Duration { return d } }

// homeServer is the server most tests use: /56s valid for 10 minutes,
// renewed at 2.5, rebound at 4, answering in 100 ms.
func homeServer() *realServer {
	return &realServer{duid: &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}},
		prefix: pdA, preferred: 5 * time.Minute, valid: 10 * time.Minute, t1: 150 * time.Second, t2: 240 * time.Second,
		delay: answerIn(100 * time.Millisecond)}
}

// forgedAnswer is an answer to m from duid about p (invalid: a status
// instead) with these lifetimes and timers.
func forgedAnswer(m *dhcpv6.Message, duid dhcpv6.DUID, p netip.Prefix, status iana.StatusCode, preferred, valid, t1, t2 time.Duration, preference uint8) *dhcpv6.Message {
	a := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: m.TransactionID}
	if m.MessageType == dhcpv6.MessageTypeSolicit {
		a.MessageType = dhcpv6.MessageTypeAdvertise
		a.AddOption(dhcpv6.OptPreference(preference))
	}
	if cid := m.Options.ClientID(); cid != nil {
		a.AddOption(dhcpv6.OptClientID(cid))
	}
	if duid != nil {
		a.AddOption(dhcpv6.OptServerID(duid))
	}
	var iaid [4]byte
	if ia := m.Options.OneIAPD(); ia != nil {
		iaid = ia.IaId
	}
	ia := &dhcpv6.OptIAPD{IaId: iaid, T1: t1, T2: t2}
	if status != iana.StatusSuccess {
		ia.Options.Add(&dhcpv6.OptStatusCode{StatusCode: status})
	} else {
		ia.Options.Add(iaPrefix(p, preferred, valid))
	}
	a.AddOption(ia)
	return a
}
