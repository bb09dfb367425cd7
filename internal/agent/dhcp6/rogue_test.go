package dhcp6

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// A rogue server under a DUID of its own, on a link whose server the client
// does not pin (no trustedServers: the default). The real server answers
// throughout; the rogue answers first. Two servers offering delegations are
// two speakers the client cannot tell apart: it takes neither, and reports
// the conflict.

// rogue answers, as forger's DUID and 1 ms after the question, the messages
// for which say returns an answer.
func rogue(say func(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message) func(*simLink, *dhcpv6.Message) {
	return answersFirst(func(*simLink) dhcpv6.DUID { return forger }, say)
}

// sameThenOwn offers every Solicit the server's prefix with Preference 255,
// and delegates its own, pdX, to the Request it wins.
func sameThenOwn(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message {
	p := pdA
	if m.MessageType == dhcpv6.MessageTypeRequest {
		p = pdX
	}
	return forgedAnswer(m, duid, p, iana.StatusSuccess, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 255)
}

func unpinned(t *testing.T, s *realServer) (*simLink, *simRun) {
	l := newSimLink(t, s)
	l.anyServer = true
	r := newSimRun(t, l)
	r.c.Servers = nil
	simChecks(t, r)
	return l, r
}

func TestARogueServerUnderItsOwnDUIDIsNotTaken(t *testing.T) {
	for _, c := range []struct {
		name string
		says func(*dhcpv6.Message, dhcpv6.DUID) *dhcpv6.Message
	}{
		// Before: pdX bound from the first Solicit, as RFC 8415 18.2.9
		// has a client take the most preferred offer.
		{"Preference 255 and another prefix", preferred255},
		// Before: the Request went to the rogue, whose Reply bound pdX.
		{"Preference 255 and the server's prefix, then its own", sameThenOwn},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, r := unpinned(t, homeServer())
			l.horizon = l.clk.Now().Add(5 * time.Minute)
			l.adversary = rogue(c.says)
			r.run(t)
			if len(r.reports) != 0 {
				t.Errorf("reports %v, want none: two servers disagree", r.reports)
			}
			if len(r.conflicts) == 0 {
				t.Error("no conflict reported")
			}
			if i := slices.IndexFunc(l.sent, func(m *dhcpv6.Message) bool { return m.MessageType != dhcpv6.MessageTypeSolicit }); i >= 0 {
				t.Errorf("sent a %s: want Solicits only", l.sent[i].MessageType)
			}
		})
	}
}

// A copier contradicting the server under its DUID leaves that server
// unbelieved, not unheard: a rogue's offer beside it does not stand alone.
func TestARogueBesideAContradictedServerIsNotTaken(t *testing.T) {
	l, r := unpinned(t, homeServer())
	l.horizon = l.clk.Now().Add(5 * time.Minute)
	copied := copier(preferred255)
	l.adversary = func(l *simLink, m *dhcpv6.Message) {
		copied(l, m)
		rogue(preferred255)(l, m)
	}
	r.run(t)
	if len(r.reports) != 0 {
		t.Errorf("reports %v, want none", r.reports)
	}
	if len(r.conflicts) == 0 {
		t.Error("no conflict reported")
	}
}

// The lease's server answering a Rebind is the word that counts: its
// NoBinding beside a rogue's delegation sends the client to solicit, not to
// the rogue's prefix.
func TestARebindTheServerRefusesIsNotTheRoguesDelegation(t *testing.T) {
	s := homeServer()
	l, r := unpinned(t, s)
	l.horizon = l.clk.Now().Add(12 * time.Minute)
	step := l.step
	l.step = func() {
		step()
		if r.held == pdA && s.prefix == pdA {
			// The server forgets the binding; a copier keeps the Renews
			// from being believed, and the rogue answers the Rebinds with
			// a delegation beside the server's NoBinding.
			s.prefix, s.noBinding = pdB, true
			l.adversary = func(l *simLink, m *dhcpv6.Message) {
				if m.MessageType == dhcpv6.MessageTypeRenew {
					copier(shortening)(l, m)
				}
				if m.MessageType == dhcpv6.MessageTypeRebind {
					rogue(func(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message {
						return forgedAnswer(m, duid, pdX, iana.StatusSuccess, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 0)
					})(l, m)
				}
			}
		}
	}
	r.run(t)
	if !slices.ContainsFunc(l.sent, func(m *dhcpv6.Message) bool { return m.MessageType == dhcpv6.MessageTypeRebind }) {
		t.Fatalf("no Rebind sent: the test missed its point")
	}
	if slices.ContainsFunc(r.reports, func(s simReport) bool { return s.Prefix == pdX }) {
		t.Errorf("reports %v: the rogue's delegation was taken", r.reports)
	}
}

// The confirmer's probe goes through the same rule: offered by two servers,
// it offers nothing (before: the rogue's pdX, which a second confirmer
// backed, and the client role moved to a node whose Solicit the rogue won).
func TestAConfirmerOfferedByTwoServersOffersNothing(t *testing.T) {
	l, r := unpinned(t, homeServer())
	l.adversary = rogue(preferred255)
	lease, err := probeOnce(t, l, r)
	if lease != nil || err == nil {
		t.Errorf("offered %v (err %v), want nothing", lease, err)
	}
	if len(r.conflicts) == 0 {
		t.Error("no conflict reported")
	}
}

// probeOnce runs one confirmer's probe with r's client on l until the link's
// script ends.
func probeOnce(t *testing.T, l *simLink, r *simRun) (*Lease, error) {
	t.Helper()
	p := &Prober{Client: *r.c}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	l.end = cancel
	return p.probe(ctx, &p.Client, time.Time{})
}
