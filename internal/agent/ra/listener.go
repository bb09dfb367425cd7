package ra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/backoff"

	"github.com/renumber/renumber/internal/agent/observe"
)

// allRouters is ff02::2, where Router Solicitations go.
var allRouters = netip.MustParseAddr("ff02::2")

// Handler receives the prefixes of each valid RA, and whether it was sent to
// all nodes (multicast) or to this one (a router unicasting its answer).
type Handler func(link string, router netip.Addr, at time.Time, prefixes []observe.RAPrefix, multicast bool)

// Reports are where a listener's news go. Each RA is stamped with the
// kernel's receive time; Read and Lost keep the agent's windows honest about
// what it has read (observe/reads.go).
type Reports struct {
	Heard func(link string, router netip.Addr, at time.Time, prefixes []observe.RAPrefix, multicast bool)
	// Solicited is told when each Router Solicitation went out.
	Solicited func(link string, at time.Time)
	// Read is told, after a Sync, that every RA that arrived before at was
	// handed to Heard.
	Read func(link string, at time.Time)
	// Lost is told that the kernel dropped RAs that arrived before at (the
	// socket's queue was full).
	Lost func(link string, at time.Time)
	// Reopened is told that a socket opened at at after another closed:
	// RAs that arrived in between were queued nowhere.
	Reopened func(link string, at time.Time)
}

// Listener reads RAs on one link until its context ends.
type Listener struct {
	Link    string
	Handle  Handler
	Reports Reports
	Clock   clock.Clock
	Log     *slog.Logger
	// Retry is the wait between failed attempts (250 ms doubling to 30 s).
	Retry *backoff.Backoff

	restart chan struct{}
	solicit chan struct{}
	// sync: a Read report is wanted (Sync); conn: the socket open, whose
	// blocked read Sync interrupts.
	sync   atomic.Bool
	connMu sync.Mutex
	conn   *conn
	// sent: a solicitation sent and not yet reported (at the next Read).
	sent struct {
		sync.Mutex
		at time.Time
	}
	// badSeen: the ignored options already logged (router and reason).
	badSeen map[string]bool
	// opened: a socket was open before (the next one reports Reopened).
	opened bool
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
func NewListener(link string, r Reports, clk clock.Clock, log *slog.Logger) *Listener {
	return &Listener{
		Link: link, Handle: r.Heard, Reports: r, Clock: clk, Log: log,
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

// Sync asks for a Read report: the listener reports, the next time it finds
// its socket empty, that everything before then was handed over. A read
// blocked on an empty socket is interrupted for it; a flood is read through
// first (its RAs, stamped later, say as much). Safe from any goroutine; costs
// nothing until asked.
func (l *Listener) Sync() {
	if l.sync.Swap(true) {
		return // asked already; the reader will see it
	}
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.conn != nil {
		// A deadline passed wakes the read at once (read handles it).
		_ = l.conn.SetReadDeadline(time.Unix(1, 0))
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
	c, err := listen(ifi)
	if err != nil {
		return fmt.Errorf("ra: listening on %s: %w", l.Link, err)
	}
	if l.opened {
		l.reopened()
	}
	l.opened = true
	// The solicitor below is waited for once the socket is closed: a
	// solicitation it recorded after the next socket opened would pass for
	// one the next socket sent (reopened).
	var solicitor sync.WaitGroup
	defer solicitor.Wait()
	var closeOnce sync.Once
	closeConn := func() { closeOnce.Do(func() { c.Close() }) }
	defer closeConn()
	l.connMu.Lock()
	l.conn = c
	l.connMu.Unlock()
	defer func() {
		l.connMu.Lock()
		l.conn = nil
		l.connMu.Unlock()
	}()

	done := make(chan struct{})
	defer close(done)
	var restarted bool
	var mu sync.Mutex
	// Solicitations go out from here, beside the reads (the socket is safe
	// for a reader and a writer at once).
	solicitor.Add(1)
	go func() {
		defer solicitor.Done()
		for {
			select {
			case <-ctx.Done():
			case <-l.restart:
				mu.Lock()
				restarted = true
				mu.Unlock()
			case <-l.solicit:
				l.sendSolicitation(c)
				continue
			case <-done:
				return
			}
			closeConn() // unblocks the read
			return
		}
	}()

	l.Log.Debug("listening for router advertisements", "link", l.Link, "index", ifi.Index)
	l.sendSolicitation(c)
	r := reader{l: l}
	buf := make([]byte, max(ifi.MTU, 1280))
	for {
		p, err := c.read(buf, r.now, r.empty)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Sync's interruption: read again, which finds the socket
			// empty (and reports) or reads on.
			if err := c.SetReadDeadline(time.Time{}); err != nil {
				return fmt.Errorf("ra: reading on %s: %w", l.Link, err)
			}
			continue
		}
		if err != nil {
			mu.Lock()
			rs := restarted
			mu.Unlock()
			if rs {
				l.Log.Debug("RA listener restarting", "link", l.Link)
				return errRestart
			}
			return fmt.Errorf("ra: reading on %s: %w", l.Link, err)
		}
		at := r.stamp(p)
		r.dropped(p.drops, at)
		// A bad checksum is an invalid message, never a drop (checksum.go).
		var prefixes []observe.RAPrefix
		var bad []error
		err = verifyChecksum(buf[:p.n], p.from, p.dst)
		if err == nil {
			prefixes, bad, err = ParseRaw(buf[:p.n], p.from, p.hopLimit)
		}
		if err != nil {
			metricInvalid.With(l.Link).Inc()
			l.Log.Debug("ignoring message", "link", l.Link, "err", err)
			continue
		}
		metricReceived.With(l.Link).Inc()
		l.Log.Debug("router advertisement", "link", l.Link, "router", p.from, "prefixes", len(prefixes),
			"multicast", p.multicast, "waited", l.Clock.Since(at))
		for _, e := range bad {
			metricInvalid.With(l.Link).Inc()
			l.badOption(p.from.WithZone(""), e)
		}
		l.Handle(l.Link, p.from.WithZone(""), at, prefixes, p.multicast)
	}
}

// reopened reports, once a socket is open after another, that RAs that
// arrived before now may have gone unread (the new socket queues from its
// opening on). A solicitation the last socket sent and did not report is
// dropped: its answer may have come in between, and a word read now is no
// answer to it (the new socket solicits at once).
func (l *Listener) reopened() {
	l.sent.Lock()
	l.sent.at = time.Time{}
	l.sent.Unlock()
	if l.Reports.Reopened != nil {
		l.Reports.Reopened(l.Link, l.Clock.Now())
	}
}

// sendSolicitation sends one Router Solicitation so a router answers at once
// instead of at its next periodic RA, and reports when it went out. Failure
// (link down) is not fatal: periodic RAs still come.
func (l *Listener) sendSolicitation(c *conn) {
	// Stamped before it goes: the router's answer then comes after the
	// stamp however late this goroutine runs on after the write. Stamped
	// after, a prompt answer was read before the send was reported, and
	// the spoofer's word that followed counted as the first since the
	// solicitation - the router's answer still to come - and was believed
	// (TestARouterImpostorMovesNothing, under load, at a 250 ms margin).
	at := l.Clock.Now()
	if err := c.solicit(); err != nil {
		l.Log.Debug("router solicitation failed", "link", l.Link, "err", err)
		return
	}
	metricSolicitations.With(l.Link).Inc()
	l.Log.Debug("router solicitation sent", "link", l.Link)
	// Reported once everything that arrived before it is handed over
	// (reader.empty): the window then reckons from the router's last
	// multicast RA, known, rather than from the solicitation.
	l.sent.Lock()
	if l.sent.at.IsZero() {
		l.sent.at = at
	}
	l.sent.Unlock()
	l.Sync()
}

// takeSent returns the solicitation sent by read and not yet reported, if
// any (one sent later waits for a later Read).
func (l *Listener) takeSent(read time.Time) (time.Time, bool) {
	l.sent.Lock()
	defer l.sent.Unlock()
	at := l.sent.at
	if at.IsZero() || at.After(read) {
		return time.Time{}, false
	}
	l.sent.at = time.Time{}
	return at, true
}
