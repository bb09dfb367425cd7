package dhcp6

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

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
