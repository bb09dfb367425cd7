package dhcp6

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"k8s.io/utils/clock"
)

func supervisor(s *server, r *reports) *Supervisor {
	return &Supervisor{Clock: clock.RealClock{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Report: r.add,
		Dial: func(string) (Conn, net.Addr, error) {
			conn, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
			return conn, s.conn.LocalAddr(), err
		}}
}

func TestAClientNoLongerWantedWithdrawsItsDelegation(t *testing.T) {
	s := newServer(t, always(pdA))
	r := &reports{ch: make(chan report, 64)}
	sup := supervisor(s, r)
	home := Want{Name: "home", UID: testUID, Link: "eth0", Length: 56}
	sup.Set(t.Context(), []Want{home})
	if got := r.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want %s bound", got, pdA)
	}
	sup.Set(t.Context(), nil) // the writer named another node
	if got := r.next(t); got != (report{pdA, true}) {
		t.Fatalf("got %v, want %s withdrawn", got, pdA)
	}
}

func TestOneClientPerLinkAndNoWithdrawalOnShutdown(t *testing.T) {
	s := newServer(t, always(pdA))
	r := &reports{ch: make(chan report, 64)}
	sup := supervisor(s, r)
	ctx, cancel := context.WithCancel(t.Context())
	sup.Set(ctx, []Want{
		{Name: "office", UID: "0f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90", Link: "eth0", Length: 60},
		{Name: "home", UID: testUID, Link: "eth0", Length: 56},
	})
	r.next(t)
	sup.mu.Lock()
	if n, run := len(sup.running), sup.running["eth0"]; n != 1 || run.want.Name != "home" {
		t.Errorf("%d clients, on eth0 %+v; want one, home's (first by name)", n, run.want)
	}
	sup.mu.Unlock()
	cancel()
	<-sup.running["eth0"].done
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, got := range r.all {
		if got.Removed {
			t.Errorf("withdrew %s on shutdown", got.Prefix)
		}
	}
}

// A confirmer solicits with the client's identity and never requests: the
// server commits nothing, and the offer is reported apart from delegations.
// It solicits again at the offer's T1; a new Ask pokes it without a restart;
// no longer wanted, it withdraws the offer.
func TestAConfirmerSolicitsAndNeverRequests(t *testing.T) {
	s := newServer(t, always(pdA))
	held, offered := &reports{ch: make(chan report, 64)}, &reports{ch: make(chan report, 64)}
	sup := supervisor(s, held)
	sup.Offered = func(link string, p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
		if link != "eth0" {
			t.Errorf("offer on %q", link)
		}
		offered.add(p, valid, removed, at)
	}
	confirm := Want{Name: "home", UID: testUID, Link: "eth0", Length: 56, Confirm: true}
	sup.Set(t.Context(), []Want{confirm})
	if got := offered.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want %s offered", got, pdA)
	}
	if got := offered.next(t); got != (report{pdA, false}) { // at T1 (1 s)
		t.Fatalf("got %v, want %s offered again", got, pdA)
	}
	sup.mu.Lock()
	before := sup.running["eth0"]
	sup.mu.Unlock()
	confirm.Ask = "2001:db8:bad::/56"
	sup.Set(t.Context(), []Want{confirm})
	if got := offered.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want %s offered when asked", got, pdA)
	}
	sup.mu.Lock()
	if sup.running["eth0"] != before {
		t.Error("a new Ask restarted the prober")
	}
	sup.mu.Unlock()
	sup.Set(t.Context(), nil)
	if got := offered.next(t); got != (report{pdA, true}) {
		t.Fatalf("got %v, want %s withdrawn", got, pdA)
	}
	for _, m := range s.messages() {
		if m.MessageType != dhcpv6.MessageTypeSolicit {
			t.Errorf("the confirmer sent a %s", m.MessageType)
		}
		if m.GetOneOption(dhcpv6.OptionRapidCommit) != nil {
			t.Error("a Solicit asked for Rapid Commit: the server would commit the binding")
		}
		if id, _ := IdentityFor(testUID, "home"); !m.Options.ClientID().Equal(id.DUID) {
			t.Errorf("solicited as %v, not the client's identity", m.Options.ClientID())
		}
	}
	held.mu.Lock()
	defer held.mu.Unlock()
	if len(held.all) != 0 {
		t.Errorf("an offer reported as a delegation held: %v", held.all)
	}
}

// A supervisor without Offered (an agent that cannot report offers) runs
// no prober.
func TestNoProberWithoutAnOfferHandler(t *testing.T) {
	s := newServer(t, always(pdA))
	sup := supervisor(s, &reports{ch: make(chan report, 64)})
	sup.Set(t.Context(), []Want{{Name: "home", UID: testUID, Link: "eth0", Length: 56, Confirm: true}})
	sup.mu.Lock()
	defer sup.mu.Unlock()
	if len(sup.running) != 0 {
		t.Errorf("running %v", sup.running)
	}
}

// The confirmer believes what the client would: a trusted server's offer,
// not another host's that answers first.
func TestAConfirmerTrustsWhatTheClientTrusts(t *testing.T) {
	s := newServer(t, always(pdA))
	s.setForge(always(pdB))
	offered := &reports{ch: make(chan report, 64)}
	sup := supervisor(s, &reports{ch: make(chan report, 64)})
	sup.Offered = func(_ string, p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
		offered.add(p, valid, removed, at)
	}
	sup.Set(t.Context(), []Want{{Name: "home", UID: testUID, Link: "eth0", Length: 56, Confirm: true, Servers: ServersOf([][]byte{s.id.ToBytes()})}})
	if got := offered.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want the trusted server's %s", got, pdA)
	}
}

// The confirmer taking the client over keeps its offer until the client's
// first report: the prefix is never missing from the node's digest between.
func TestAConfirmerTakingOverKeepsItsOfferUntilTheClientReports(t *testing.T) {
	s := newServer(t, always(pdA))
	held, offered := &reports{ch: make(chan report, 64)}, &reports{ch: make(chan report, 64)}
	sup := supervisor(s, held)
	sup.Offered = func(_ string, p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
		offered.add(p, valid, removed, at)
	}
	w := Want{Name: "home", UID: testUID, Link: "eth0", Length: 56, Confirm: true}
	sup.Set(t.Context(), []Want{w})
	if got := offered.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want %s offered", got, pdA)
	}
	w.Confirm = false
	sup.Set(t.Context(), []Want{w})
	offered.mu.Lock()
	for _, r := range offered.all {
		if r.Removed {
			t.Errorf("the offer was withdrawn as the client started, before it held anything")
		}
	}
	offered.mu.Unlock()
	if got := held.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want %s bound", got, pdA)
	}
	offered.mu.Lock()
	defer offered.mu.Unlock()
	if !slices.Contains(offered.all, report{pdA, true}) {
		t.Errorf("offers %v: want the offer withdrawn once the client reported", offered.all)
	}
}

// A client's node listens for the packets to the servers' group on the
// client's link (a socket here on loopback, whose datagrams are whole IPv6
// packets, stands for the packet socket): a Release in the client's name
// sent there is reported on that link. A confirmer does not listen.
func TestAClientsNodeHearsAReleaseInItsName(t *testing.T) {
	s := newServer(t, always(pdA))
	r := &reports{ch: make(chan report, 64)}
	sup := supervisor(s, r)
	listening := make(chan *net.UDPConn, 2)
	sup.Listen = func(link string) (Conn, error) {
		conn, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
		if err == nil {
			listening <- conn
		}
		return conn, err
	}
	impersonated := make(chan string, 8)
	sup.Impersonated = func(link string, _ time.Time) { impersonated <- link }
	sup.Offered = func(string, netip.Prefix, time.Duration, bool, time.Time) {}
	sup.Set(t.Context(), []Want{{Name: "home", UID: testUID, Link: "eth1", Length: 56, Confirm: true}})
	sup.Set(t.Context(), []Want{{Name: "home", UID: testUID, Link: "eth1", Length: 56}})
	conn := <-listening
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	forger, err := net.DialUDP("udp6", nil, conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	release := clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 0x42, pdA).ToBytes()
	if _, err := forger.Write(ipv6Packet(allServers, nil, ServerPort, release, 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case link := <-impersonated:
		if link != "eth1" {
			t.Errorf("reported on %q, want eth1", link)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Release was not reported")
	}
	if n := len(listening); n != 0 {
		t.Errorf("%d more listeners opened: the confirmer listened too", n)
	}
}

// Servers keeps a set of DUIDs comparable: the same set in any order, with
// repeats or empty entries, is one value, and it reads back as raw bytes.
func TestServersKeepASetOfDUIDs(t *testing.T) {
	a, b := []byte{0, 1, 0, 1, 0xaa}, []byte{0, 3, 0, 1, 2}
	s := ServersOf([][]byte{b, a, nil, b})
	if s != ServersOf([][]byte{a, b}) {
		t.Errorf("%q and %q: one set, two values", s, ServersOf([][]byte{a, b}))
	}
	if diff := cmp.Diff([][]byte{a, b}, s.DUIDs()); diff != "" {
		t.Errorf("DUIDs (-want +got):\n%s", diff)
	}
	if got := ServersOf(nil).DUIDs(); len(got) != 0 {
		t.Errorf("no servers read back as %x", got)
	}
}
