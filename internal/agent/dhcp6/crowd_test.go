package dhcp6

// A crowd of servers and a server that refuses: found by a red team playing a
// host that answers each Solicit under as many DUIDs as it likes, and one that
// makes the real server refuse (a forged Release, its pool starved). Each
// test failed on the code before: the rogue's prefix bound or offered, or a
// stall nobody reported.

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// refusalFlood answers every Solicit first with maxServers Advertises, each
// under a fresh DUID and each a refusal (NoPrefixAvail): no offer, no
// contradiction - only the tally's cap filled before the real server's
// Advertise arrives 100 ms later.
func refusalFlood(l *simLink, m *dhcpv6.Message) {
	if m.MessageType != dhcpv6.MessageTypeSolicit {
		return
	}
	for i := range maxServers {
		duid := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0x77, byte(i)}}
		l.forge(time.Millisecond, forgedAnswer(m, duid, pdA, iana.StatusNoPrefixAvail, 0, 0, 0, 0, 0))
	}
}

// The client, unpinned (the default), cannot acquire the server's delegation
// while the flood lasts - the real server's Advertise is past the tally's
// cap - but the stall is reported: a tally that overflows is a conflict.
func TestARefusalFloodIsAReportedStall(t *testing.T) {
	l, r := unpinned(t, homeServer())
	l.horizon = l.clk.Now().Add(30 * time.Minute)
	l.adversary = refusalFlood
	r.run(t)
	if r.held.IsValid() {
		t.Errorf("held %v: the flood left the tally no room for the real server's offer", r.held)
	}
	if len(r.conflicts) == 0 {
		t.Errorf("nothing held and no conflict reported: a silent stall (%d Solicits sent)", len(l.sent))
	}
}

// The confirmer's probe: nothing offered, and the conflict reported.
func TestARefusalFloodLeavesTheProbeOfferedNothingReported(t *testing.T) {
	l, r := unpinned(t, homeServer())
	l.adversary = refusalFlood
	lease, err := probeOnce(t, l, r)
	if lease == nil && len(r.conflicts) == 0 {
		t.Errorf("offered nothing (err %v) and no conflict reported", err)
	}
}

// pdX is defined by the package's tests: the rogue's prefix.

// crowdThenOffer answers every Solicit first with maxServers-1 refusals
// under fresh DUIDs and then, under one more fresh DUID, an offer of pdX; it
// answers the Request (and Renews, Rebinds) naming that DUID with pdX. The
// tally is full before the real server's Advertise arrives: the rogue is
// the only offerer the client hears.
func crowdThenOffer(l *simLink, m *dhcpv6.Message) {
	own := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0x88, 0x88}}
	switch m.MessageType {
	case dhcpv6.MessageTypeSolicit:
		for i := range maxServers - 1 {
			duid := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0x77, byte(i)}}
			l.forge(time.Millisecond, forgedAnswer(m, duid, pdA, iana.StatusNoPrefixAvail, 0, 0, 0, 0, 0))
		}
		l.forge(time.Millisecond, forgedAnswer(m, own, pdX, iana.StatusSuccess, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 0))
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew:
		if sid := m.Options.ServerID(); sid != nil && sid.Equal(own) {
			l.forge(time.Millisecond, forgedAnswer(m, own, pdX, iana.StatusSuccess, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 0))
		}
	}
}

// Unpinned: the client binds nothing (it bound the rogue's pdX, unreported).
func TestACrowdedTallyBindsNothing(t *testing.T) {
	l, r := unpinned(t, homeServer())
	l.horizon = l.clk.Now().Add(10 * time.Minute)
	l.adversary = crowdThenOffer
	r.run(t)
	for _, rep := range r.reports {
		if rep.Prefix == pdX {
			t.Errorf("bound the rogue's %s at %s (conflicts reported: %d); the real server answered every message with %s",
				pdX, rep.At.Sub(time.Unix(1e9, 0)), len(r.conflicts), pdA)
			break
		}
	}
}

// The confirmer's probe is offered nothing. (It was offered the rogue's pdX,
// alone, unreported: two honest confirmers backed it, the client role moved
// to one of them, whose Solicit bound pdX too.)
func TestACrowdedTallyOffersTheProbeNothing(t *testing.T) {
	l, r := unpinned(t, homeServer())
	l.adversary = crowdThenOffer
	lease, err := probeOnce(t, l, r)
	if lease != nil && lease.Prefix == pdX {
		t.Errorf("the probe was offered the rogue's %s (err %v, conflicts reported: %d)", pdX, err, len(r.conflicts))
	}
}

// Pinned (trustedServers): the crowd's DUIDs never reach the tally.
func TestACrowdNeverReachesAPinnedTally(t *testing.T) {
	l := newSimLink(t, homeServer())
	r := newSimRun(t, l)
	l.horizon = l.clk.Now().Add(10 * time.Minute)
	l.adversary = crowdThenOffer
	r.run(t)
	if r.held != pdA {
		t.Errorf("pinned: held %v, want %s", r.held, pdA)
	}
}

// A client holding the server's lease: a copier contradicts its Renews
// (reported while it lasts), and the Rebinds are crowded: the lease's
// server's Reply is the 17th and never heard. The Rebind takes nothing (it
// took the lone delegation left, the rogue's).
func TestACrowdedRebindTakesNothing(t *testing.T) {
	s := homeServer()
	l, r := unpinned(t, s)
	l.horizon = l.clk.Now().Add(12 * time.Minute)
	own := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0x88, 0x88}}
	l.adversary = func(l *simLink, m *dhcpv6.Message) {
		switch m.MessageType {
		case dhcpv6.MessageTypeRenew:
			copier(shortening)(l, m)
		case dhcpv6.MessageTypeRebind:
			for i := range maxServers - 1 {
				duid := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0x77, byte(i)}}
				l.forge(time.Millisecond, forgedAnswer(m, duid, pdA, iana.StatusNoPrefixAvail, 0, 0, 0, 0, 0))
			}
			l.forge(time.Millisecond, forgedAnswer(m, own, pdX, iana.StatusSuccess, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 0))
		}
	}
	r.run(t)
}

// A real server renumbering gracefully (RFC 8415 18.3.4 lets it): its Reply
// to a Renew for the old prefix lists the old one deprecated (preferred 0,
// valid 10 min), then the new one. The client takes the preferred one, the
// new. (It took the first with a valid lifetime: the deprecated old one,
// reported preferred, renewed again and again; the new never landed.)
func TestAGracefulRenumberingLands(t *testing.T) {
	s := homeServer()
	l, r := unpinned(t, s)
	l.horizon = l.clk.Now().Add(30 * time.Minute)
	graceful := false
	step := l.step
	l.step = func() {
		step()
		if !graceful && r.held == pdA {
			graceful = true
			s.delay = answerIn(48 * time.Hour) // the sim's server falls silent; the graceful one answers
			l.adversary = func(l *simLink, m *dhcpv6.Message) {
				var a *dhcpv6.Message
				switch m.MessageType {
				case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest:
					a = forgedAnswer(m, s.duid, pdB, iana.StatusSuccess, s.preferred, s.valid, s.t1, s.t2, 0)
				case dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind:
					a = forgedAnswer(m, s.duid, pdB, iana.StatusSuccess, s.preferred, s.valid, s.t1, s.t2, 0)
					ia := a.Options.OneIAPD()
					asked, _ := prefixOf(m.Options.OneIAPD().Options.Prefixes()[0].Prefix)
					if asked != pdB {
						ia.Options.Options = append([]dhcpv6.Option{iaPrefix(asked, 0, 10*time.Minute)}, ia.Options.Options...)
					}
				}
				if a != nil {
					l.schedule(l.clk.Now().Add(100*time.Millisecond), a, true)
				}
			}
		}
	}
	r.run(t)
	if r.held != pdB {
		var took []string
		for _, le := range r.leases {
			took = append(took, le.Prefix.String()+" preferred "+le.Preferred.String())
		}
		t.Errorf("30 min after a graceful renumbering (T1 2.5 min): held %s, want %s; leases taken %v", r.held, pdB, took)
	}
}

// The real server has nothing to delegate for a while (its upstream is
// down, the router just booted: RFC 8415 18.3.9 has it answer NoPrefixAvail)
// and says so to every Solicit; a rogue under its own DUID offers pdX beside
// it. A refusal is a speaker too, so the client binds nothing. (A refusal
// was "no offer": the rogue's stood alone and the client bound pdX, which
// the real server never delegated - no race, no crowd.)
func TestARogueBesideARefusingServerIsNotTaken(t *testing.T) {
	s := homeServer()
	s.delay = answerIn(48 * time.Hour) // the sim's server is replaced by the refusing one below
	l, r := unpinned(t, s)
	l.horizon = l.clk.Now().Add(10 * time.Minute)
	l.adversary = func(l *simLink, m *dhcpv6.Message) {
		if m.MessageType == dhcpv6.MessageTypeSolicit {
			// The real server, 100 ms: NoPrefixAvail.
			l.schedule(l.clk.Now().Add(100*time.Millisecond), forgedAnswer(m, s.duid, pdA, iana.StatusNoPrefixAvail, 0, 0, 0, 0, 0), true)
		}
		rogue(func(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message {
			return forgedAnswer(m, duid, pdX, iana.StatusSuccess, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 0)
		})(l, m)
	}
	r.run(t)
}

// The same for the confirmer's probe: offered nothing (it was offered pdX).
func TestAProbeBesideARefusingServerIsOfferedNothing(t *testing.T) {
	s := homeServer()
	s.delay = answerIn(48 * time.Hour)
	l, r := unpinned(t, s)
	l.adversary = func(l *simLink, m *dhcpv6.Message) {
		l.schedule(l.clk.Now().Add(100*time.Millisecond), forgedAnswer(m, s.duid, pdA, iana.StatusNoPrefixAvail, 0, 0, 0, 0, 0), true)
		rogue(func(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message {
			return forgedAnswer(m, duid, pdX, iana.StatusSuccess, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 0)
		})(l, m)
	}
	lease, _ := probeOnce(t, l, r)
	if lease != nil && lease.Prefix == pdX {
		t.Errorf("the probe was offered the rogue's %s beside the real server's NoPrefixAvail (conflicts reported: %d)", pdX, len(r.conflicts))
	}
}

// Once the real server delegates again, no rogue lease is left to keep (the
// client kept one: its Renews named the rogue's DUID, which alone answered
// them, and the writer kept pdX current for as long as the rogue renewed it).
func TestNoRogueLeaseOutlivesARefusal(t *testing.T) {
	s := homeServer()
	realDelay := s.delay
	s.delay = answerIn(48 * time.Hour)
	l, r := unpinned(t, s)
	l.horizon = l.clk.Now().Add(3 * time.Hour)
	refusing := true
	step := l.step
	l.step = func() {
		step()
		if refusing && r.held == pdX {
			refusing = false
			s.delay = realDelay // the real server delegates pdA again
		}
	}
	own := forger
	l.adversary = func(l *simLink, m *dhcpv6.Message) {
		if refusing && m.MessageType == dhcpv6.MessageTypeSolicit {
			l.schedule(l.clk.Now().Add(100*time.Millisecond), forgedAnswer(m, s.duid, pdA, iana.StatusNoPrefixAvail, 0, 0, 0, 0, 0), true)
		}
		switch m.MessageType {
		case dhcpv6.MessageTypeSolicit:
			l.forge(time.Millisecond, forgedAnswer(m, own, pdX, iana.StatusSuccess, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 0))
		case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew:
			if sid := m.Options.ServerID(); sid != nil && sid.Equal(own) {
				l.forge(time.Millisecond, forgedAnswer(m, own, pdX, iana.StatusSuccess, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 0))
			}
		}
	}
	r.c.Report = func(p netip.Prefix, valid time.Duration, removed bool, at time.Time) { // no simChecks: count instead
		if removed {
			r.held = netip.Prefix{}
		} else {
			r.held = p
		}
		r.reports = append(r.reports, simReport{at, p, valid, removed})
	}
	l.step = func() {
		if refusing && r.held == pdX {
			refusing = false
			s.delay = realDelay
		}
	}
	r.run(t)
	if r.held == pdX {
		t.Errorf("3 h later, the real server delegating %s throughout the last of them: the client holds the rogue's %s (%d reports, conflicts %d)", pdA, pdX, len(r.reports), len(r.conflicts))
	}
}
