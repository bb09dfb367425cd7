package ra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/backoff"

	"github.com/renumber/renumber/internal/agent/observe"
)

// allRouters is ff02::2, where Router Solicitations go.
var allRouters = netip.MustParseAddr("ff02::2")

// Handler receives the prefixes of each valid RA, and whether it was sent to
// all nodes (multicast) or to this one (a router unicasting its answer).
type Handler func(link string, router netip.Addr, at time.Time, prefixes []observe.RAPrefix, multicast bool)

// Listener reads RAs on one link until its context ends.
type Listener struct {
	Link   string
	Handle Handler
	// Solicited is told when each Router Solicitation went out (nil: nobody).
	Solicited func(link string, at time.Time)
	Clock     clock.Clock
	Log       *slog.Logger
	// Retry is the wait between failed attempts (250 ms doubling to 30 s).
	Retry *backoff.Backoff

	restart chan struct{}
	solicit chan struct{}
	// badSeen: the ignored options already logged (router and reason).
	badSeen map[string]bool
}

// maxBadSeen bounds badSeen: sources are whatever a host on the link puts in
// its packets.
const maxBadSeen = 64

// badOption logs an option the router's RA carried that is ignored (the
// rest of the RA counts) once per router and reason: a router sends the
// same RA every few minutes, and the journal has one line per real event.
func (l *Listener) badOption(router netip.Addr, err error) {
	key := router.String() + " " + err.Error()
	if l.badSeen[key] || len(l.badSeen) >= maxBadSeen {
		l.Log.Debug("ignoring prefix option", "link", l.Link, "router", router, "err", err)
		return
	}
	if l.badSeen == nil {
		l.badSeen = map[string]bool{}
	}
	l.badSeen[key] = true
	l.Log.Info(l.Link+": ignoring a prefix option in the RAs of "+router.String()+" (the rest of each RA counts)", "err", err)
}

// NewListener returns a listener for link.
func NewListener(link string, h Handler, solicited func(string, time.Time), clk clock.Clock, log *slog.Logger) *Listener {
	return &Listener{
		Link: link, Handle: h, Solicited: solicited, Clock: clk, Log: log,
		Retry:   backoff.New(250*time.Millisecond, 30*time.Second),
		restart: make(chan struct{}, 1),
		solicit: make(chan struct{}, 1),
	}
}

// Solicit sends a Router Solicitation soon: a router's RA changed what it
// offers, and the router's answer corroborates or contradicts it. While no
// socket is open it waits for the next one.
func (l *Listener) Solicit() {
	select {
	case l.solicit <- struct{}{}:
	default:
	}
}

// Restart makes the listener reopen its socket and solicit at once: the link came
// back up, or was re-created with a new index.
func (l *Listener) Restart() {
	select {
	case l.restart <- struct{}{}:
	default:
	}
}

// Run listens until ctx ends. It never returns early: every failure is retried
// with exponential backoff, and a failure is logged once, not on every retry.
func (l *Listener) Run(ctx context.Context) {
	var lastErr string
	for ctx.Err() == nil {
		started := l.Clock.Now()
		err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRestart) {
			l.Retry.Reset()
			continue
		}
		metricErrors.With(l.Link).Inc()
		if l.Clock.Since(started) > time.Minute {
			l.Retry.Reset()
		}
		if msg := err.Error(); msg != lastErr {
			l.Log.Warn("RA listener failed; retrying with backoff", "link", l.Link, "err", err)
			lastErr = msg
		}
		select {
		case <-ctx.Done():
			return
		case <-l.restart:
			l.Retry.Reset()
		case <-l.Clock.After(l.Retry.Next()):
		}
	}
}

var errRestart = errors.New("ra: restart requested")

func (l *Listener) session(ctx context.Context) error {
	ifi, err := net.InterfaceByName(l.Link)
	if err != nil {
		return fmt.Errorf("ra: %w", err)
	}
	// Fails until the link-local address has finished DAD: the caller retries.
	conn, _, err := ndp.Listen(ifi, ndp.LinkLocal)
	if err != nil {
		return fmt.Errorf("ra: listening on %s: %w", l.Link, err)
	}
	var closeOnce sync.Once
	closeConn := func() { closeOnce.Do(func() { conn.Close() }) }
	defer closeConn()

	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterAdvertisement)
	if err := conn.SetICMPFilter(&f); err != nil {
		return fmt.Errorf("ra: ICMP filter: %w", err)
	}
	// The destination tells a router that unicasts its answers from one
	// that multicasts them (observe's window, answer.go).
	if err := conn.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagDst, true); err != nil {
		return fmt.Errorf("ra: control messages: %w", err)
	}

	done := make(chan struct{})
	defer close(done)
	var restarted bool
	var mu sync.Mutex
	// Solicitations go out from here, beside the reads (the socket is safe
	// for a reader and a writer at once).
	go func() {
		for {
			select {
			case <-ctx.Done():
			case <-l.restart:
				mu.Lock()
				restarted = true
				mu.Unlock()
			case <-l.solicit:
				l.sendSolicitation(conn, ifi)
				continue
			case <-done:
				return
			}
			closeConn() // unblocks ReadFrom
			return
		}
	}()

	l.Log.Debug("listening for router advertisements", "link", l.Link, "index", ifi.Index)
	l.sendSolicitation(conn, ifi)
	buf := make([]byte, max(ifi.MTU, 1280))
	for {
		n, cm, from, err := conn.ReadRaw(buf)
		if err != nil {
			mu.Lock()
			r := restarted
			mu.Unlock()
			if r {
				l.Log.Debug("RA listener restarting", "link", l.Link)
				return errRestart
			}
			return fmt.Errorf("ra: reading on %s: %w", l.Link, err)
		}
		hop, multicast := 0, true
		if cm != nil {
			hop = cm.HopLimit
			multicast = cm.Dst == nil || cm.Dst.IsMulticast()
		}
		prefixes, bad, err := ParseRaw(buf[:n], from, hop)
		if err != nil {
			metricInvalid.With(l.Link).Inc()
			l.Log.Debug("ignoring message", "link", l.Link, "err", err)
			continue
		}
		metricReceived.With(l.Link).Inc()
		l.Log.Debug("router advertisement", "link", l.Link, "router", from, "prefixes", len(prefixes))
		for _, e := range bad {
			metricInvalid.With(l.Link).Inc()
			l.badOption(from.WithZone(""), e)
		}
		l.Handle(l.Link, from.WithZone(""), l.Clock.Now(), prefixes, multicast)
	}
}

// sendSolicitation sends one Router Solicitation so a router answers at once
// instead of at its next periodic RA, and reports when it went out. Failure
// (link down) is not fatal: periodic RAs still come.
func (l *Listener) sendSolicitation(conn *ndp.Conn, ifi *net.Interface) {
	rs := &ndp.RouterSolicitation{}
	if len(ifi.HardwareAddr) > 0 {
		rs.Options = []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: ifi.HardwareAddr}}
	}
	if err := conn.WriteTo(rs, nil, allRouters); err != nil {
		l.Log.Debug("router solicitation failed", "link", l.Link, "err", err)
		return
	}
	metricSolicitations.With(l.Link).Inc()
	if l.Solicited != nil {
		l.Solicited(l.Link, l.Clock.Now())
	}
}
