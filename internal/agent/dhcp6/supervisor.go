package dhcp6

import (
	"cmp"
	"context"
	"encoding/hex"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Want is a client this agent must run: the writer named its node for the
// DynamicPrefix (status.dhcpv6pd.clientNode).
type Want struct {
	Name, UID string // the DynamicPrefix
	Link      string
	Length    int
	// Servers: the trusted servers' DUIDs in hex, comma-separated, sorted
	// ("": any server). A string, so that wants compare with ==.
	Servers string
}

// servers decodes Want.Servers.
func (w Want) servers() [][]byte {
	var out [][]byte
	for _, h := range strings.Split(w.Servers, ",") {
		if b, err := hex.DecodeString(h); err == nil && len(b) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// Supervisor runs the clients wanted, one per link (the client port is the
// link's): of two DynamicPrefixes asking on one link, the first by name runs.
type Supervisor struct {
	Clock  clock.Clock
	Log    *slog.Logger
	Dial   func(link string) (Conn, net.Addr, error)
	Report func(p netip.Prefix, valid time.Duration, removed bool, at time.Time)
	// Conflict, when set, is told when a client's answers under one server's
	// DUID contradicted each other (Client.Conflict).
	Conflict func(link string, at time.Time)

	mu      sync.Mutex
	running map[string]*running // by link
	refused map[string]bool     // Name + " " + Link: warned once
}

type running struct {
	want Want
	stop context.CancelFunc
	done chan netip.Prefix
}

// Set makes the clients running those wanted. A client no longer wanted stops
// and withdraws its delegation from the digest: the node no longer keeps it
// (the server does; the next client gets it back). Clients stop without
// withdrawing when ctx ends: the agent is shutting down, not handing over.
func (s *Supervisor) Set(ctx context.Context, wants []Want) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		s.running, s.refused = map[string]*running{}, map[string]bool{}
	}
	slices.SortFunc(wants, func(a, b Want) int { return cmp.Compare(a.Name, b.Name) })
	byLink := map[string]Want{}
	for _, w := range wants {
		if first, taken := byLink[w.Link]; taken {
			if key := w.Name + " " + w.Link; !s.refused[key] {
				s.refused[key] = true
				s.Log.Warn("DHCPv6 client not started: another DynamicPrefix runs one on this link", "dynamicprefix", w.Name, "link", w.Link, "running", first.Name)
			}
			continue
		}
		byLink[w.Link] = w
	}
	for link, r := range s.running {
		if w, ok := byLink[link]; ok && w == r.want {
			continue
		}
		r.stop()
		if held := <-r.done; held.IsValid() {
			s.Report(held, 0, true, s.Clock.Now())
		}
		s.Log.Info("DHCPv6 client stopped", "dynamicprefix", r.want.Name, "link", link)
		delete(s.running, link)
	}
	for link, w := range byLink {
		if _, ok := s.running[link]; ok {
			continue
		}
		if err := s.start(ctx, w); err != nil {
			s.Log.Warn("DHCPv6 client not started", "dynamicprefix", w.Name, "err", err)
		}
	}
}

func (s *Supervisor) start(ctx context.Context, w Want) error {
	id, err := IdentityFor(w.UID, w.Name)
	if err != nil {
		return err
	}
	cctx, stop := context.WithCancel(ctx)
	r := &running{want: w, stop: stop, done: make(chan netip.Prefix, 1)}
	c := &Client{Link: w.Link, Length: w.Length, ID: id, Clock: s.Clock, Log: s.Log.With("dynamicprefix", w.Name),
		Dial: func() (Conn, net.Addr, error) { return s.Dial(w.Link) }, Report: s.Report, Servers: w.servers()}
	if s.Conflict != nil {
		c.Conflict = func(at time.Time) { s.Conflict(w.Link, at) }
	}
	s.running[w.Link] = r
	s.Log.Info("DHCPv6 client started", "dynamicprefix", w.Name, "link", w.Link, "length", w.Length, "trustedServers", len(c.Servers))
	go func() { r.done <- c.Run(cctx) }()
	return nil
}
