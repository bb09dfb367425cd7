package dhcp6

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// FuzzDHCPv6Client plays the LAN adversary against the client on a
// simulated link with a conforming server, pinned to it (trustedServers) or
// trusting any server (the adversary's own DUID is then a second server the
// client cannot tell from the real one). The fuzzer chooses the server's
// lifetimes, its delay for each answer (within 900 ms, under collectWindow),
// when it renumbers and how (the new prefix in the Reply, or NoBinding), and
// every message of the adversary: its type, DUID (the server's included),
// transaction ID (the current one, the one before, another), client ID,
// prefix, status, lifetimes, timers, Preference and arrival time. The DUIDs
// come from a wider alphabet: the server's, a rogue's, a second rogue's, one
// differing from the server's in a byte, none, or a fresh one each time. With
// one more byte (widen) it also chooses a crowd of fresh DUIDs answering
// first (past the tally's cap), a server that refuses (NoPrefixAvail, and
// NoBinding for the binding it had) and later delegates anew, a graceful
// renumbering (the old prefix listed deprecated first), a client message in
// the client's name to the server, which acts on it as a real one would (a
// Release or Decline frees the binding, a Request for another prefix moves
// it), and replays of anything the link carried, the client's own messages
// included. Then the adversary falls silent, and the server renumbers once
// more.
//
// Safety, after every step: every lease the client takes is a prefix the
// server delegated, with lifetimes and timers ending no later than the
// server said; nothing is held past the valid lifetime reported; a prefix the
// server still binds is withdrawn before the lifetime the server stated only
// after a conflict was reported; a conflict is reported only when a message
// under the server's DUID (unpinned: any DUID) came from elsewhere, or the
// server renumbered between two transmissions of one exchange; the
// client's node reports every Release or Decline in the client's name, and
// every Request naming another prefix than the one held, and never the
// client's own messages (serverHears).
// Liveness: while the server binds a prefix the client does not hold, a
// conflict is reported within a bound (stalled); once the adversary is
// silent, the client holds the server's prefix within the longest retransmission time (REN_MAX_RT, with jitter)
// and two exchanges; the last renumbering lands by T1 plus three exchanges
// (Renew, and after NoBinding Solicit and Request), each the server's delay
// and the window.
func FuzzDHCPv6Client(f *testing.F) {
	// A script: one byte for the server (its valid lifetime, Preference,
	// how it renumbers, whether it is pinned), then for each message the client sends, one byte
	// (the server's delay, a renumbering, how many forgeries) and four for
	// each forgery (see forge).
	const (
		clean      = "\x02"                      // the server answers in 100 ms, nobody else
		shortening = "\x22" + "\x00\x01\x09\x11" // and the server's DUID, 1 ms after the question: the prefix asked for, lifetimes and timers 1 s
		bad255     = "\x22" + "\x80\x11\x36\x66" // and the server's DUID: 2001:db8:bad::/56 for an hour, Preference 255
		renumbers  = "\x0a"                      // the server renumbers, answering in 100 ms
		// A rogue server under its own DUID, 1 ms after the question,
		// Preference 255, for an hour: 2001:db8:bad::/56, or the
		// server's own prefix (its Reply to the Request it wins then
		// delegates the first).
		rogue255  = "\x22" + "\x84\x11\x36\x66"
		rogueSame = "\x22" + "\x84\x01\x36\x66"
		unpinned  = "\x21" // no trustedServers, leases of 10 minutes
	)
	f.Add([]byte{0})
	f.Add([]byte("\x01" + clean + clean + strings.Repeat(shortening, 10)))
	f.Add([]byte("\x01" + clean + clean + shortening + strings.Repeat(bad255, 3) + strings.Repeat(shortening+bad255, 5)))
	f.Add([]byte("\x11" + clean + clean + renumbers + strings.Repeat(shortening, 4)))
	f.Add([]byte("\x03" + clean + clean + clean + renumbers + bad255 + bad255 + clean))
	f.Add([]byte(unpinned + strings.Repeat(rogue255, 6)))
	f.Add([]byte(unpinned + strings.Repeat(rogueSame+rogue255, 4)))
	// The server's DUID copied and contradicted, and a rogue's own offer
	// standing alone beside it.
	f.Add([]byte(unpinned + strings.Repeat("\x42"+bad255[1:]+rogue255[1:], 4)))
	// Renews contradicted until T2, then a rogue's delegation to the
	// Rebind beside the server's answer.
	f.Add([]byte(unpinned + clean + clean + strings.Repeat(shortening, 12) + strings.Repeat("\x4a"+shortening[1:]+rogue255[1:], 4)))
	// The wider model (widen): a crowd of fresh DUIDs of each kind, pinned
	// and not; the server refusing for a while, then delegating anew; a
	// graceful renumbering; each client message in the client's name;
	// replays of what the link carried.
	const (
		widen      = "\x12" // the server answers in 100 ms, and one more byte
		crowdOffer = widen + "\x01"
		crowdFull  = widen + "\x02"
		crowdRogue = widen + "\x03"
		refuse     = widen + "\x04"
		delegate   = widen + "\x08"
		graceful   = widen + "\x0c"
		release    = widen + "\x10"
		decline    = widen + "\x20"
		requestX   = widen + "\x30"
		renewHeld  = widen + "\x40"
		replayOwn  = widen + "\x50"
		replayOld  = widen + "\x60"
		solicit    = widen + "\x70"
		replayLast = widen + "\x80\x00"
		replayBack = widen + "\x80\x43"
	)
	for _, cfg := range []string{"\x01", unpinned} {
		f.Add([]byte(cfg + strings.Repeat(crowdOffer, 4) + strings.Repeat(crowdFull, 4) + strings.Repeat(crowdRogue, 4)))
		f.Add([]byte(cfg + clean + clean + refuse + clean + clean + clean + delegate + clean + clean))
		f.Add([]byte(cfg + clean + clean + refuse + strings.Repeat(rogue255, 3) + clean))
		f.Add([]byte(cfg + clean + clean + graceful + clean + clean + replayLast + clean))
		f.Add([]byte(cfg + clean + clean + release + clean + clean + decline + clean + requestX + clean + renewHeld + clean))
		f.Add([]byte(cfg + clean + clean + replayOwn + replayOld + solicit + replayBack + replayBack + clean))
		f.Add([]byte(cfg + clean + clean + release + strings.Repeat(bad255, 3) + requestX + strings.Repeat(rogueSame, 3)))
	}
	f.Add([]byte("\x09" + clean + clean + renumbers + clean + graceful + clean))
	f.Fuzz(func(t *testing.T, script []byte) {
		m := newModel(t, script)
		m.run.run(t)
		m.finish()
	})
}

var (
	pdC      = netip.MustParsePrefix("2001:db8:c00::/56")
	delays   = []time.Duration{0, time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond, 900 * time.Millisecond}
	arrivals = []time.Duration{0, time.Millisecond, 300 * time.Millisecond, 950 * time.Millisecond, 1500 * time.Millisecond, 5 * time.Second, 40 * time.Second, 0}
)

// The liveness bounds: an exchange is the server's delay and the window; a
// retransmission comes within REN_MAX_RT and its jitter.
var (
	exchangeTime = delays[len(delays)-1] + collectWindow
	quietBound   = renewRT[1]*6/5 + 3*exchangeTime
)

type model struct {
	t      *testing.T
	script []byte
	l      *simLink
	s      *realServer
	run    *simRun
	next   int // the server's prefixes so far

	made         int                      // fresh DUIDs made so far
	forgedClient map[*dhcpv6.Message]bool // the client messages the adversary made up (not replays)
	agreedAt     time.Time                // the client last held the server's prefix
	quietAt      time.Time                // the adversary fell silent (zero: not yet)
	renumberAt   time.Time                // the last renumbering is due (zero: not yet)
	landBy       time.Time
	landed       bool
	lastBound    time.Time
	renumbered   time.Time // the server's last renumbering
}

func newModel(t *testing.T, script []byte) *model {
	m := &model{t: t, script: script, forgedClient: map[*dhcpv6.Message]bool{}}
	cfg := m.byte()
	s := homeServer()
	s.valid = []time.Duration{2 * time.Minute, 10 * time.Minute, time.Hour, 4 * time.Minute}[cfg%4]
	s.preferred, s.t1, s.t2 = s.valid/2, s.valid/4, s.valid*2/5
	s.preference = []uint8{0, 255}[cfg>>2&1]
	s.noBinding = cfg&0x10 != 0
	s.graceful = cfg&8 != 0
	delay := delays[2]
	s.delay = func() time.Duration { return delay }
	m.s, m.next = s, 1
	m.l = newSimLink(t, s)
	m.l.adversary = func(l *simLink, sent *dhcpv6.Message) {
		if len(m.script) == 0 {
			m.silent()
			return
		}
		op := m.byte()
		delay = delays[int(op&7)%len(delays)]
		if op&8 != 0 {
			m.renumber(op&0x80 != 0)
		}
		if op&0x10 != 0 {
			m.widen(sent, m.byte())
		}
		for range op >> 5 & 3 {
			m.forge(sent)
		}
	}
	m.l.serverHears = m.serverHears
	m.run = newSimRun(t, m.l)
	if cfg&0x20 != 0 {
		// No trustedServers: a forger under its own DUID is a second
		// server, which the client cannot tell from the real one.
		m.run.c.Servers, m.l.anyServer = nil, true
	}
	m.checks()
	return m
}

func (m *model) byte() byte {
	if len(m.script) == 0 {
		return 0
	}
	b := m.script[0]
	m.script = m.script[1:]
	return b
}

// prefix is the server's nth prefix: 2001:db8:a00::/56, 2001:db8:b00::/56,
// then a new one each time, never one before.
func prefix(n int) netip.Prefix {
	a := netip.MustParseAddr("2001:db8:a00::").As16()
	a[4], a[5] = byte(n+10), byte((n+10)>>8)
	return netip.PrefixFrom(netip.AddrFrom16(a), 56)
}

func (m *model) renumber(noBinding bool) {
	m.s.prefix, m.s.noBinding = prefix(m.next), noBinding
	m.next++
	m.renumbered = m.l.clk.Now()
}

// silent: the script ran out. The adversary's last message arrives by then.
func (m *model) silent() {
	if !m.quietAt.IsZero() {
		return
	}
	m.quietAt = m.l.clk.Now().Add(arrivals[6])
	m.renumberAt = m.quietAt.Add(quietBound)
	if !m.s.prefix.IsValid() {
		m.renumber(true) // the refusal ends
	}
	if m.run.held != m.s.prefix {
		// The server moved the binding under a lease the client holds:
		// the client learns it at T1.
		m.renumberAt = m.renumberAt.Add(m.s.t1)
	}
	m.l.horizon = m.renumberAt.Add(m.s.t1 + 3*exchangeTime + time.Second)
}

// forge schedules one adversary message, read from 4 bytes of the script.
func (m *model) forge(sent *dhcpv6.Message) {
	b0, b1, b2, b3 := m.byte(), m.byte(), m.byte(), m.byte()
	var duid dhcpv6.DUID
	switch b0 >> 1 & 3 {
	case 0, 1:
		duid = m.s.duid
	case 2:
		duid = forger
	case 3:
		// The wider alphabet: none, a fresh DUID each time (a crowd
		// across messages), one differing from the server's in its last
		// byte, a second rogue.
		switch b3 & 0x88 {
		case 0x08:
			duid = m.fresh()
		case 0x80:
			duid = lookalike(m.s.duid)
		case 0x88:
			duid = forger2
		}
	}
	p := []netip.Prefix{m.s.prefix, prefix(max(m.next-2, 0)), pdX, pdA, pdB, pdC, {}, {}}[b1>>3&7]
	status := []iana.StatusCode{iana.StatusSuccess, iana.StatusSuccess, iana.StatusNoBinding, iana.StatusNoPrefixAvail}[b1>>6]
	lifetimes := []time.Duration{0, time.Second, 4 * time.Second, m.s.valid, m.s.valid + 10*time.Second, m.s.valid - 10*time.Second, time.Hour, 0xffffffff * time.Second}
	timers := []time.Duration{0, time.Second, m.s.t1, m.s.t1 + 5*time.Second, m.s.t2, 2 * m.s.t2, time.Hour, m.s.t1 - 2*time.Second}
	a := forgedAnswer(sent, duid, p, status, lifetimes[b2>>3&7], lifetimes[b2&7], timers[b3&7], timers[b3>>4&7], []uint8{0, 128, 255, 7}[b0>>6])
	if b0&1 != 0 { // the other type: a Reply to a Solicit, an Advertise otherwise
		if a.MessageType == dhcpv6.MessageTypeReply {
			a.MessageType = dhcpv6.MessageTypeAdvertise
		} else {
			a.MessageType = dhcpv6.MessageTypeReply
		}
	}
	switch b0 >> 3 & 3 {
	case 2:
		if n := len(m.l.sent); n >= 2 {
			a.TransactionID = m.l.sent[n-2].TransactionID
		}
	case 3:
		a.TransactionID[0] ^= 0x5a
	}
	if b0&0x20 != 0 {
		a.Options.Del(dhcpv6.OptionClientID)
		a.AddOption(dhcpv6.OptClientID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 9}}))
	}
	if b2&0x40 != 0 { // the old prefix withdrawn first, as a server renumbering says it
		ia := a.Options.OneIAPD()
		ia.Options.Options = append([]dhcpv6.Option{iaPrefix(m.run.held, 0, 0)}, ia.Options.Options...)
	}
	m.l.forge(arrivals[b1&7], a)
}

// checks installs the properties, checked after every step.
func (m *model) checks() {
	r, l, t := m.run, m.l, m.t
	r.c.trace = func(lease Lease) {
		s, ok := l.stated[lease.Prefix]
		switch {
		case !ok:
			t.Fatalf("took %s, which the server never delegated", lease.Prefix)
		case lease.At.Add(lease.Valid).After(s.valid), lease.At.Add(lease.Preferred).After(s.preferred),
			lease.At.Add(lease.T1).After(s.t1), lease.At.Add(lease.T2).After(s.t2):
			t.Fatalf("took %s: preferred %s valid %s T1 %s T2 %s from %s; the server said until %s, %s, %s, %s",
				lease.Prefix, lease.Preferred, lease.Valid, lease.T1, lease.T2, lease.At.Format(time.TimeOnly),
				s.preferred.Format(time.TimeOnly), s.valid.Format(time.TimeOnly), s.t1.Format(time.TimeOnly), s.t2.Format(time.TimeOnly))
		}
		m.lastBound = l.clk.Now()
	}
	report := r.c.Report
	r.c.Report = func(p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
		if was := r.held; was.IsValid() && (removed || p != was) && was == m.s.prefix && at.Before(l.stated[was].valid) &&
			!m.conflictSince(m.lastBound) {
			t.Fatalf("withdrew %s at %s: the server still binds it, until %s, and no conflict was reported",
				was, at.Format(time.TimeOnly), l.stated[was].valid.Format(time.TimeOnly))
		}
		report(p, valid, removed, at)
	}
	conflict := r.c.Conflict
	r.c.Conflict = func(at time.Time) {
		// The server's own answers to two transmissions of one exchange
		// disagree when it renumbered in between: that is a conflict too.
		if (l.lastForged.IsZero() || at.Sub(l.lastForged) > collectWindow) && (m.renumbered.IsZero() || at.Sub(m.renumbered) > 2*collectWindow) {
			t.Fatalf("conflict reported at %s; the last message under the server's DUID from elsewhere came at %s, the last renumbering at %s",
				at.Format(time.TimeOnly), l.lastForged.Format(time.TimeOnly), m.renumbered.Format(time.TimeOnly))
		}
		conflict(at)
	}
	l.step = func() {
		now := l.clk.Now()
		if r.held.IsValid() && now.After(r.heldUntil) {
			t.Fatalf("at %s: %s still held, valid until %s", now.Format(time.TimeOnly), r.held, r.heldUntil.Format(time.TimeOnly))
		}
		m.stalled(now)
		switch {
		case m.quietAt.IsZero():
		case m.landBy.IsZero() && !now.Before(m.renumberAt):
			if r.held != m.s.prefix {
				t.Fatalf("%s after the adversary fell silent (at %s), the client holds %q, not the server's %s",
					quietBound, m.quietAt.Format(time.TimeOnly), r.held, m.s.prefix)
			}
			m.renumber(m.s.noBinding)
			m.landBy = now.Add(m.s.t1 + 3*exchangeTime)
		case !m.landBy.IsZero() && r.held == m.s.prefix:
			m.landed = true
		case !m.landBy.IsZero() && now.After(m.landBy):
			t.Fatalf("the server renumbered to %s; by %s the client holds %q", m.s.prefix, m.landBy.Format(time.TimeOnly), r.held)
		}
	}
}

func (m *model) conflictSince(t time.Time) bool {
	c := m.run.conflicts
	return len(c) > 0 && !c[len(c)-1].Before(t)
}

// finish checks what the run must have reached.
func (m *model) finish() {
	if m.quietAt.IsZero() {
		return // a script longer than the day the link runs
	}
	if m.landBy.IsZero() {
		m.t.Fatalf("the run ended at %s, before the last renumbering (due %s)", m.l.clk.Now().Format(time.TimeOnly), m.renumberAt.Format(time.TimeOnly))
	}
	if !m.landed && m.run.held != m.s.prefix {
		m.t.Errorf("the last renumbering (to %s) never landed; the client holds %q", m.s.prefix, m.run.held)
	}
}

// stalled fails the run when the server has bound a prefix the client does
// not hold for longer than a conforming exchange can take - the server's
// T1, the longest Solicit and Renew retransmission times, the exchanges -
// and nothing was reported in that time: a stall must be a reported one.
func (m *model) stalled(now time.Time) {
	if !m.s.prefix.IsValid() {
		return
	}
	if m.run.held == m.s.prefix {
		m.agreedAt = now
		return
	}
	since := m.agreedAt
	if m.renumbered.After(since) {
		since = m.renumbered
	}
	if since.IsZero() {
		since = time.Unix(1e9, 0) // the run's start
	}
	bound := m.s.t1 + solicitRT[1]*6/5 + renewRT[1]*6/5 + 4*exchangeTime
	if now.Sub(since) <= bound {
		return
	}
	from := now.Add(-bound)
	for _, ats := range [][]time.Time{m.run.conflicts, m.run.forged} {
		if len(ats) > 0 && !ats[len(ats)-1].Before(from) {
			return
		}
	}
	m.t.Fatalf("at %s the server binds %s since %s, the client holds %q, and nothing was reported since %s: a silent stall",
		now.Format(time.TimeOnly), m.s.prefix, since.Format(time.TimeOnly), m.run.held, from.Format(time.TimeOnly))
}

func TestTheModelsPrefixesAreNew(t *testing.T) {
	if prefix(0) != pdA || prefix(1) != pdB || prefix(2) != pdC || prefix(300) == prefix(44) {
		t.Errorf("%s %s %s", prefix(0), prefix(1), prefix(2))
	}
}
