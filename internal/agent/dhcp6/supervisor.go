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

	"github.com/renumber/renumber/internal/backoff"
)

// Want is a client this agent must run: the writer named its node for the
// DynamicPrefix (status.dhcpv6pd.clientNode).
type Want struct {
	Name, UID string // the DynamicPrefix
	Link      string
	Length    int
	// Servers: the trusted servers' DUIDs ("": any server), as ServersOf
	// keeps them so that wants compare with ==.
	Servers Servers
	// Confirm: the writer named this node confirmer
	// (status.dhcpv6pd.confirmerNode): a Prober runs, never a Client.
	Confirm bool
	// Ask is what the status says awaits confirmation
	// (dhcpv6pd.unconfirmed): when it changes the Prober solicits again.
	Ask string
}

// same reports whether w and o ask for the same client or prober (Ask
// aside: a change of it pokes the prober instead).
func (w Want) same(o Want) bool {
	w.Ask, o.Ask = "", ""
	return w == o
}

// Servers is a set of DUIDs kept comparable: each in hex, comma-separated,
// sorted. ServersOf makes it and DUIDs reads it back; nothing else spells it.
type Servers string

// ServersOf keeps duids (raw bytes, as dynamicprefix.DHCPv6PD.Servers
// returns them) as Servers.
func ServersOf(duids [][]byte) Servers {
	hexed := make([]string, 0, len(duids))
	for _, b := range duids {
		if len(b) > 0 {
			hexed = append(hexed, hex.EncodeToString(b))
		}
	}
	slices.Sort(hexed)
	return Servers(strings.Join(slices.Compact(hexed), ","))
}

// DUIDs returns the DUIDs s keeps, as raw bytes.
func (s Servers) DUIDs() [][]byte {
	var out [][]byte
	for _, h := range strings.Split(string(s), ",") {
		if b, err := hex.DecodeString(h); err == nil && len(b) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// Supervisor runs the clients wanted, and the probers that confirm another
// node's client (Want.Confirm), one per link (the client port is the
// link's): of two DynamicPrefixes asking on one link, the first by name runs.
type Supervisor struct {
	Clock  clock.Clock
	Log    *slog.Logger
	Dial   func(link string) (Conn, net.Addr, error)
	Report func(p netip.Prefix, valid time.Duration, removed bool, at time.Time)
	// Conflict, when set, is told when a client's answers under one server's
	// DUID contradicted each other (Client.Conflict).
	Conflict func(link string, at time.Time)
	// Offered is told what a prober is offered on link (Prober.Report);
	// nil: this agent does not confirm (wants to confirm are refused).
	Offered func(link string, p netip.Prefix, valid time.Duration, removed bool, at time.Time)
	// Listen, when set, opens a listener for the packets to the servers'
	// group on a link (ListenServers):
	// a client's node hears the client messages sent under its DUID, and
	// tells Impersonated of those it did not send (Watch).
	Listen       func(link string) (Conn, error)
	Impersonated func(link string, at time.Time)
	// Missed, when set, is told of n packets the listener's queue dropped
	// unread (Watch.Missed).
	Missed func(link string, n int)
	// Dropped, when set, is told when a client's server dropped a binding
	// it holds with valid lifetime left (Client.Dropped).
	Dropped func(link string, at time.Time)

	mu      sync.Mutex
	running map[string]*running // by link
	refused map[string]bool     // Name + " " + Link: warned once
}

type running struct {
	want Want
	stop context.CancelFunc
	done chan netip.Prefix
	poke chan struct{} // a prober's
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
		if w.Confirm && s.Offered == nil {
			continue
		}
		if first, taken := byLink[w.Link]; taken {
			if key := w.Name + " " + w.Link; !s.refused[key] {
				s.refused[key] = true
				s.Log.Warn("DHCPv6 client not started: another DynamicPrefix runs one on this link", "dynamicprefix", w.Name, "link", w.Link, "running", first.Name)
			}
			continue
		}
		byLink[w.Link] = w
	}
	handover := map[string]netip.Prefix{}
	for link, r := range s.running {
		if w, ok := byLink[link]; ok && w.same(r.want) {
			if w.Ask != r.want.Ask && r.poke != nil {
				select {
				case r.poke <- struct{}{}:
				default: // a probe is due already
				}
			}
			r.want = w
			continue
		}
		r.stop()
		held := <-r.done
		w, next := byLink[link]
		switch {
		case !held.IsValid():
		case r.want.Confirm && next && !w.Confirm && w.Name == r.want.Name:
			// The confirmer takes the client over: its offer stands
			// until the client's first report, so that the prefix is
			// never unreported in between.
			handover[link] = held
		case r.want.Confirm:
			s.Offered(link, held, 0, true, s.Clock.Now())
		default:
			s.Report(held, 0, true, s.Clock.Now())
		}
		s.Log.Info("DHCPv6 "+r.want.role()+" stopped", "dynamicprefix", r.want.Name, "link", link)
		delete(s.running, link)
	}
	for link, w := range byLink {
		if _, ok := s.running[link]; ok {
			continue
		}
		if err := s.start(ctx, w, handover[link]); err != nil {
			s.Log.Warn("DHCPv6 client not started", "dynamicprefix", w.Name, "err", err)
		}
	}
}

// start runs w; offered is what this node's prober was offered for it
// (invalid: none), withdrawn at the client's first report.
func (s *Supervisor) start(ctx context.Context, w Want, offered netip.Prefix) error {
	id, err := IdentityFor(w.UID, w.Name)
	if err != nil {
		return err
	}
	cctx, stop := context.WithCancel(ctx)
	r := &running{want: w, stop: stop, done: make(chan netip.Prefix, 1)}
	report := s.Report
	if offered.IsValid() {
		var once sync.Once
		report = func(p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
			once.Do(func() { s.Offered(w.Link, offered, 0, true, at) })
			s.Report(p, valid, removed, at)
		}
	}
	c := &Client{Link: w.Link, Length: w.Length, ID: id, Clock: s.Clock, Log: s.Log.With("dynamicprefix", w.Name),
		Dial: func() (Conn, net.Addr, error) { return s.Dial(w.Link) }, Report: report, Servers: w.Servers.DUIDs()}
	if s.Conflict != nil {
		c.Conflict = func(at time.Time) { s.Conflict(w.Link, at) }
	}
	s.running[w.Link] = r
	if w.Confirm {
		r.poke = make(chan struct{}, 1)
		c.Report = func(p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
			s.Offered(w.Link, p, valid, removed, at)
		}
		p := &Prober{Client: *c, Poke: r.poke}
		s.Log.Info("DHCPv6 confirmer started: soliciting, never requesting", "dynamicprefix", w.Name, "link", w.Link, "trustedServers", len(c.Servers))
		go func() { r.done <- p.Run(cctx) }()
		return nil
	}
	s.Log.Info("DHCPv6 client started", "dynamicprefix", w.Name, "link", w.Link, "length", w.Length, "trustedServers", len(c.Servers))
	if s.Dropped != nil {
		c.Dropped = func(at time.Time) { s.Dropped(w.Link, at) }
	}
	if s.Listen != nil {
		c.Watch = &Watch{ID: id, Link: w.Link, Log: c.Log, Impersonated: func(at time.Time) {
			if s.Impersonated != nil {
				s.Impersonated(w.Link, at)
			}
		}, Missed: func(n int, _ time.Time) {
			if s.Missed != nil {
				s.Missed(w.Link, n)
			}
		}}
		go s.watch(cctx, c.Watch)
	}
	go func() { r.done <- c.Run(cctx) }()
	return nil
}

// watch runs w on the listener of its link until ctx ends, opening it
// again after a failure.
func (s *Supervisor) watch(ctx context.Context, w *Watch) {
	retry := backoff.New(time.Second, time.Minute)
	var failing string // the error logged last: one line per new reason
	for ctx.Err() == nil {
		conn, err := s.Listen(w.Link)
		if err == nil {
			err = w.Run(ctx, conn, s.Clock)
			conn.Close()
		}
		if ctx.Err() != nil {
			return
		}
		if err.Error() != failing {
			failing = err.Error()
			w.Log.Warn("DHCPv6 client cannot hear the link's client messages (a host speaking to the server as this client goes unreported); retrying", "link", w.Link, "err", err)
		}
		backoff.Sleep(ctx, s.Clock, retry.Next())
	}
}

func (w Want) role() string {
	if w.Confirm {
		return "confirmer"
	}
	return "client"
}
