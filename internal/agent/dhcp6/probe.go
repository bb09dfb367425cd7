package dhcp6

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/renumber/renumber/internal/backoff"
)

// Prober confirms another node's delegation (the writer named this node
// confirmer: status.dhcpv6pd.confirmerNode). It solicits as the client does,
// with the same identity, and never requests: a Solicit without Rapid
// Commit commits nothing on the server (RFC 8415 18.3.1, 18.3.9), so the
// binding, and any route the router installed toward the client, stay put,
// while the Advertise offers the binding the server holds for the identity.
// It reports the offer (Report), which is never a delegation held.
//
// It solicits when started, when poked (the status asks for a confirmation:
// dhcpv6pd.unconfirmed changed), and again at the offer's T1, so that a
// client that keeps a renumbering to itself is caught within one T1. The
// answers pass the client's trust rules: trusted servers only, heard out
// for collectWindow, contradictions believed neither way and reported.
type Prober struct {
	// Client is whose identity, socket, trust rules and conflict reports it
	// shares; its Report is told the offers (removed false, valid: the
	// offer's valid lifetime) and when one ends unrepeated (removed true).
	Client
	// Poke, when it receives, asks for a probe now.
	Poke <-chan struct{}
}

// probeRetry bounds the wait after a probe heard nothing to believe;
// probeFor is how long one probe retransmits its Solicit (1, 2, 4, ... s).
var (
	probeRetry = [2]time.Duration{10 * time.Second, 10 * time.Minute}
	probeFor   = time.Minute
)

// Run probes until ctx ends and returns the prefix reported offered then
// (invalid if none).
func (p *Prober) Run(ctx context.Context) netip.Prefix {
	c := &p.Client
	var offered netip.Prefix
	var until time.Time // the offer's valid lifetime ends
	failures := backoff.NewWith(probeRetry[0], probeRetry[1], p.jitter)
	for ctx.Err() == nil {
		if offered.IsValid() && !p.Clock.Now().Before(until) {
			p.Report(offered, 0, true, p.Clock.Now())
			offered = netip.Prefix{}
		}
		l, err := p.probe(ctx, c, until)
		wait := failures.Next()
		switch {
		case ctx.Err() != nil:
			return offered
		case err != nil:
			p.Log.Debug("DHCPv6 confirmation probe heard nothing to believe", "link", p.Link, "err", err)
		default:
			failures.Reset()
			c.conflicted = false
			if offered.IsValid() && offered != l.Prefix {
				p.Report(offered, 0, true, l.At)
			}
			if offered != l.Prefix {
				p.Log.Info("DHCPv6 server offers the delegation", "link", p.Link, "prefix", l.Prefix, "valid", l.Valid, "again", l.T1)
			}
			offered, until = l.Prefix, l.At.Add(l.Valid)
			p.Report(l.Prefix, l.Valid, false, l.At)
			wait = l.T1
		}
		if offered.IsValid() {
			wait = min(wait, until.Sub(p.Clock.Now()))
		}
		t := p.Clock.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return offered
		case <-p.Poke:
		case <-t.C():
		}
		t.Stop()
	}
	return offered
}

// probe is one Solicit exchange on a socket of its own, given up after
// probeFor, or at end (zero: none) for the offer reported then to lapse.
func (p *Prober) probe(ctx context.Context, c *Client, end time.Time) (*Lease, error) {
	conn, server, err := p.Dial()
	if err != nil {
		return nil, errors.Join(errSocket, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if deadline := p.Clock.Now().Add(probeFor); end.IsZero() || deadline.Before(end) {
		end = deadline
	}
	return c.solicit(ctx, &exchanger{conn: conn, server: server, id: p.ID, clock: p.Clock, contradicted: c.contradicted, jitter: p.jitter}, end)
}
