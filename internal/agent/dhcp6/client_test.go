package dhcp6

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"k8s.io/utils/clock"
)

const testUID = "6f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90"

// server is a DHCPv6 server on loopback answering by a script: answer says,
// per message received, which prefix to delegate (invalid: stay silent) or
// which status to give the IA_PD instead.
type server struct {
	t    *testing.T
	conn *net.UDPConn
	id   dhcpv6.DUID

	mu       sync.Mutex
	received []*dhcpv6.Message
	answer   func(m *dhcpv6.Message) (netip.Prefix, iana.StatusCode)
	// forge, when set, answers first, as another server (forger's DUID):
	// a host on the link that saw the multicast transaction.
	forge func(m *dhcpv6.Message) (netip.Prefix, iana.StatusCode)
}

var forger = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 0x66}}

func newServer(t *testing.T, answer func(*dhcpv6.Message) (netip.Prefix, iana.StatusCode)) *server {
	t.Helper()
	conn, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	s := &server{t: t, conn: conn, id: &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}, answer: answer}
	t.Cleanup(func() { conn.Close() })
	go s.serve()
	return s
}

func (s *server) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		m, err := dhcpv6.MessageFromBytes(buf[:n])
		if err != nil {
			continue
		}
		s.mu.Lock()
		s.received = append(s.received, m)
		answer, forge := s.answer, s.forge
		s.mu.Unlock()
		if forge != nil {
			if p, status := forge(m); p.IsValid() || status != iana.StatusSuccess {
				s.conn.WriteTo(replyTo(m, forger, p, status).ToBytes(), from)
			}
		}
		p, status := answer(m)
		if !p.IsValid() && status == iana.StatusSuccess {
			continue
		}
		s.conn.WriteTo(replyTo(m, s.id, p, status).ToBytes(), from)
	}
}

// replyTo is server's answer to m: p delegated, or status on the IA_PD.
func replyTo(m *dhcpv6.Message, server dhcpv6.DUID, p netip.Prefix, status iana.StatusCode) *dhcpv6.Message {
	reply := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: m.TransactionID}
	if m.MessageType == dhcpv6.MessageTypeSolicit {
		reply.MessageType = dhcpv6.MessageTypeAdvertise
	}
	reply.AddOption(dhcpv6.OptClientID(m.Options.ClientID()))
	reply.AddOption(dhcpv6.OptServerID(server))
	ia := &dhcpv6.OptIAPD{IaId: m.Options.OneIAPD().IaId, T1: time.Second, T2: 2 * time.Second}
	if status != iana.StatusSuccess {
		ia.Options.Add(&dhcpv6.OptStatusCode{StatusCode: status})
	} else {
		ia.Options.Add(&dhcpv6.OptIAPrefix{PreferredLifetime: 3 * time.Second, ValidLifetime: 4 * time.Second,
			Prefix: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}})
	}
	reply.AddOption(ia)
	return reply
}

func (s *server) setForge(f func(*dhcpv6.Message) (netip.Prefix, iana.StatusCode)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forge = f
}

func (s *server) setAnswer(a func(*dhcpv6.Message) (netip.Prefix, iana.StatusCode)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = a
}

// types are the message types received so far.
func (s *server) types() []dhcpv6.MessageType {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []dhcpv6.MessageType
	for _, m := range s.received {
		out = append(out, m.MessageType)
	}
	return out
}

func (s *server) messages() []*dhcpv6.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
}

// report is one call of Client.Report.
type report struct {
	Prefix  netip.Prefix
	Removed bool
}

type reports struct {
	mu  sync.Mutex
	all []report
	ch  chan report
}

func (r *reports) add(p netip.Prefix, _ time.Duration, removed bool, _ time.Time) {
	r.mu.Lock()
	r.all = append(r.all, report{p, removed})
	r.mu.Unlock()
	r.ch <- report{p, removed}
}

// next waits for the next report (the test's own timeout bounds the wait).
func (r *reports) next(t *testing.T) report {
	t.Helper()
	select {
	case got := <-r.ch:
		return got
	case <-t.Context().Done():
		t.Fatal("no report")
		return report{}
	}
}

func startClient(t *testing.T, s *server) (*reports, context.CancelFunc, chan netip.Prefix) {
	t.Helper()
	return startClientWith(t, s, func(*Client) {})
}

// startClientWith is startClient with the client changed by set first.
func startClientWith(t *testing.T, s *server, set func(*Client)) (*reports, context.CancelFunc, chan netip.Prefix) {
	t.Helper()
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	r := &reports{ch: make(chan report, 64)}
	c := &Client{Link: "lo", Length: 56, ID: id, Clock: clock.RealClock{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dial: func() (Conn, net.Addr, error) {
			conn, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
			return conn, s.conn.LocalAddr(), err
		},
		Report: r.add}
	set(c)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan netip.Prefix, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, cancel, done
}

var (
	pdA = netip.MustParsePrefix("2001:db8:a00::/56")
	pdB = netip.MustParsePrefix("2001:db8:b00::/56")
)

func always(p netip.Prefix) func(*dhcpv6.Message) (netip.Prefix, iana.StatusCode) {
	return func(*dhcpv6.Message) (netip.Prefix, iana.StatusCode) { return p, iana.StatusSuccess }
}

// untilRenewed answers with before until the first Renew arrives, and with
// after from that Renew on. The server's script, not the test's timing,
// decides which answer a message gets: the client's first Renew can leave
// as soon as it reports the binding (T1 of the test server is the
// collect window).
func untilRenewed(before, after func(*dhcpv6.Message) (netip.Prefix, iana.StatusCode)) func(*dhcpv6.Message) (netip.Prefix, iana.StatusCode) {
	renewed := false // serve calls answer from one goroutine
	return func(m *dhcpv6.Message) (netip.Prefix, iana.StatusCode) {
		if m.MessageType == dhcpv6.MessageTypeRenew {
			renewed = true
		}
		if renewed {
			return after(m)
		}
		return before(m)
	}
}

func TestADelegationIsSolicitedRequestedAndRenewedAtT1(t *testing.T) {
	s := newServer(t, always(pdA))
	r, _, _ := startClient(t, s)
	if got := r.next(t); got != (report{pdA, false}) {
		t.Fatalf("first report %v, want %s bound", got, pdA)
	}
	if got := r.next(t); got != (report{pdA, false}) { // renewed: the same prefix, reported again
		t.Fatalf("after T1: %v, want %s renewed", got, pdA)
	}
	got := s.types()[:3]
	want := []dhcpv6.MessageType{dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew}
	if !slices.Equal(got, want) {
		t.Errorf("messages %v, want %v", got, want)
	}
	for _, m := range s.messages()[:3] {
		if _, ok := m.Options.ClientID().(*dhcpv6.DUIDUUID); !ok {
			t.Errorf("%s: client ID %v, want a DUID-UUID", m.MessageType, m.Options.ClientID())
		}
		ia := m.Options.OneIAPD()
		if ia == nil || len(ia.Options.Prefixes()) != 1 {
			t.Fatalf("%s: IA_PD %v, want one with one prefix", m.MessageType, ia)
		}
		hint := ia.Options.Prefixes()[0].Prefix
		if ones, _ := hint.Mask.Size(); ones != 56 {
			t.Errorf("%s: asks for /%d, want /56", m.MessageType, ones)
		}
		if m.Options.ElapsedTime() < 0 || m.GetOneOption(dhcpv6.OptionElapsedTime) == nil {
			t.Errorf("%s: no elapsed time", m.MessageType)
		}
		if wantServer := m.MessageType != dhcpv6.MessageTypeSolicit; (m.Options.ServerID() != nil) != wantServer {
			t.Errorf("%s: server ID %v", m.MessageType, m.Options.ServerID())
		}
	}
}

func TestTheIdentityIsTheDynamicPrefixs(t *testing.T) {
	a, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := IdentityFor(testUID, "home")
	if !a.DUID.Equal(again.DUID) || a.IAID != again.IAID {
		t.Error("the same DynamicPrefix gave two identities: a restart or failover would get another prefix")
	}
	other, _ := IdentityFor("0f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90", "home")
	if a.DUID.Equal(other.DUID) {
		t.Error("two DynamicPrefixes (UIDs) share a DUID")
	}
	if _, err := IdentityFor("not-a-uuid", "home"); err == nil {
		t.Error("a UID that is not a UUID was accepted")
	}
}

func TestNoBindingOnRenewIsReportedAndSolicitsAnew(t *testing.T) {
	// The ISP's server restarted with another pool: it forgot pdA.
	s := newServer(t, untilRenewed(always(pdA), func(m *dhcpv6.Message) (netip.Prefix, iana.StatusCode) {
		if m.MessageType == dhcpv6.MessageTypeRenew {
			return netip.Prefix{}, iana.StatusNoBinding
		}
		return pdB, iana.StatusSuccess
	}))
	// The client never releases: a binding dropped with valid lifetime
	// left is reported (a Release in its name it could not hear, or a
	// server that lost its leases), and the client follows the server.
	var dropped atomic.Int32
	r, _, _ := startClientWith(t, s, func(c *Client) { c.Dropped = func(time.Time) { dropped.Add(1) } })
	if got := r.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want %s bound", got, pdA)
	}
	if got := r.next(t); got != (report{pdA, true}) {
		t.Fatalf("got %v, want the old prefix withdrawn", got)
	}
	if got := r.next(t); got != (report{pdB, false}) {
		t.Fatalf("got %v, want the new prefix", got)
	}
	if n := dropped.Load(); n != 1 {
		t.Errorf("%d drops reported, want 1", n)
	}
	types := s.types()
	i := slices.Index(types, dhcpv6.MessageTypeRenew)
	want := []dhcpv6.MessageType{dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest}
	if i < 0 || len(types) < i+3 || !slices.Equal(types[i:i+3], want) {
		t.Errorf("messages %v, want Renew answered NoBinding (nothing contradicting it within the window), then Solicit, Request", types)
	}
}

func TestAnUnansweredRenewRebindsAtT2AndTheLeaseRunsOutAtItsValidLifetime(t *testing.T) {
	// The server falls silent from the Renew on, until the lease has run out.
	s := newServer(t, untilRenewed(always(pdA), always(netip.Prefix{})))
	r, _, _ := startClient(t, s)
	if got := r.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want %s bound", got, pdA)
	}
	if got := r.next(t); got != (report{pdA, true}) {
		t.Fatalf("got %v, want %s expired", got, pdA)
	}
	types := s.types()
	renew, rebind := slices.Index(types, dhcpv6.MessageTypeRenew), slices.Index(types, dhcpv6.MessageTypeRebind)
	if renew < 0 || rebind < renew {
		t.Fatalf("messages %v, want Renew, then Rebind", types)
	}
	for _, m := range s.messages()[rebind:] {
		if m.MessageType == dhcpv6.MessageTypeRebind && m.Options.ServerID() != nil {
			t.Error("a Rebind names a server: it is for any server")
		}
	}
	// Then it solicits again, and a server that answers is believed.
	s.setAnswer(always(pdB))
	if got := r.next(t); got != (report{pdB, false}) {
		t.Fatalf("got %v, want %s", got, pdB)
	}
}

func TestAnAdvertiseWithoutAPrefixIsNoOffer(t *testing.T) {
	s := newServer(t, func(m *dhcpv6.Message) (netip.Prefix, iana.StatusCode) {
		return netip.Prefix{}, iana.StatusNoPrefixAvail
	})
	r, _, _ := startClient(t, s)
	for len(s.types()) < 2 { // the Solicit, retransmitted: the first answer was no offer
		time.Sleep(50 * time.Millisecond)
	}
	if got := s.types()[:2]; !slices.Equal(got, []dhcpv6.MessageType{dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeSolicit}) {
		t.Fatalf("messages %v, want Solicit retransmitted", got)
	}
	s.setAnswer(always(pdA))
	if got := r.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want %s once a server offers it", got, pdA)
	}
}

func TestStoppingNeverReleases(t *testing.T) {
	s := newServer(t, always(pdA))
	r, cancel, done := startClient(t, s)
	r.next(t)
	cancel()
	if held := <-done; held != pdA {
		t.Errorf("Run returned %s, want the prefix held, %s", held, pdA)
	}
	done <- pdA // for the cleanup
	for _, typ := range s.types() {
		if typ == dhcpv6.MessageTypeRelease {
			t.Error("the client released its delegation")
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.all, report{pdA, true}) {
		t.Error("the client withdrew its delegation on stopping; only the supervisor decides that")
	}
}
