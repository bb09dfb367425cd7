package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/backoff"
)

// errSocket wraps a socket failure: the client opens a new one.
var errSocket = errors.New("dhcp6: socket")

// errNoAnswer: no answer to believe before the deadline or the last
// transmission.
var errNoAnswer = errors.New("dhcp6: no answer")

// errContradicted: answers from one server disagreed.
var errContradicted = errors.New("dhcp6: answers from one server contradict each other")

// exchanger sends a client's messages and waits for their answers.
type exchanger struct {
	conn   Conn
	server net.Addr
	id     Identity
	clock  clock.Clock
	// contradicted is told of servers whose answers to one transmission
	// disagreed.
	contradicted func([]dhcpv6.DUID)
	jitter       func() float64 // nil: random
	// sending, when set, is told each message before it is first sent
	// (Watch.sending).
	sending func(*dhcpv6.Message)
	buf     [1500]byte
}

// message builds a message of type t from this client, to server (nil: any
// server), carrying ia.
func (x *exchanger) message(t dhcpv6.MessageType, server dhcpv6.DUID, ia dhcpv6.Option) *dhcpv6.Message {
	m, err := dhcpv6.NewMessage() // only fails when the system's random source does
	if err != nil {
		m = &dhcpv6.Message{}
	}
	m.MessageType = t
	m.AddOption(dhcpv6.OptClientID(x.id.DUID))
	if server != nil {
		m.AddOption(dhcpv6.OptServerID(server))
	}
	m.AddOption(dhcpv6.OptElapsedTime(0))
	m.AddOption(ia)
	return m
}

// ask sends m and retransmits it (RFC 8415 15: the timeout doubles from
// rt[0] to rt[1], with jitter) until judge takes what was heard in answer to
// one transmission, maxRC transmissions were made (0: no limit), or deadline
// passes (zero: none). From the first answer hear counts, it listens
// collectWindow more, never past end (zero: none): answers it cannot hear out
// are not believed. After the window it hears nothing until it transmits
// again: a forger's late answer would stand alone there, the server having
// answered already.
func (x *exchanger) ask(ctx context.Context, m *dhcpv6.Message, want dhcpv6.MessageType, rt [2]time.Duration, maxRC int, deadline, end time.Time,
	hear func(*dhcpv6.Message) (answer, bool), judge func(*tally) bool) error {
	start := x.clock.Now()
	timeouts := backoff.NewWith(rt[0], rt[1], x.jitter)
	last := errNoAnswer
	if x.sending != nil {
		x.sending(m)
	}
	for sent := 0; maxRC == 0 || sent < maxRC; sent++ {
		// Elapsed time, in hundredths of a second, saturating (RFC 8415 21.9).
		m.UpdateOption(dhcpv6.OptElapsedTime(min(x.clock.Since(start), 655350*time.Millisecond)))
		if _, err := x.conn.WriteTo(m.ToBytes(), x.server); err != nil {
			return fmt.Errorf("%w: sending %s: %w", errSocket, m.MessageType, err)
		}
		next := x.clock.Now().Add(timeouts.Next())
		if !deadline.IsZero() && deadline.Before(next) {
			next = deadline
		}
		var t tally
		heard, err := x.listen(ctx, m, want, next, hear, &t, true)
		if err != nil {
			return err
		}
		if heard {
			until, cut := x.clock.Now().Add(collectWindow), false
			if !end.IsZero() && end.Before(until) {
				until, cut = end, true
			}
			if _, err := x.listen(ctx, m, want, until, hear, &t, false); err != nil {
				return err
			}
			if c := t.contradicted(); (len(c) > 0 || t.crowded) && x.contradicted != nil {
				x.contradicted(c)
			}
			switch {
			case t.crowded:
				last = fmt.Errorf("%w: more than %d servers answered", errNoAnswer, maxServers)
			case cut:
				last = fmt.Errorf("%w: the delegation ended within %s of the answer", errNoAnswer, collectWindow)
			case judge(&t):
				return nil
			case len(t.contradicted()) > 0:
				last = fmt.Errorf("%w: %w", errNoAnswer, errContradicted)
			default:
				last = fmt.Errorf("%w: nothing to take", errNoAnswer)
			}
			if _, err := x.listen(ctx, m, want, next, hear, nil, false); err != nil {
				return err
			}
		}
		if !deadline.IsZero() && !x.clock.Now().Before(deadline) {
			break
		}
	}
	return fmt.Errorf("%s: %w", m.MessageType, last)
}

// listen reads until until, and tallies the answers to m of type want that
// hear counts (t nil: drops them); with first, it returns at the first
// (true).
func (x *exchanger) listen(ctx context.Context, m *dhcpv6.Message, want dhcpv6.MessageType, until time.Time, hear func(*dhcpv6.Message) (answer, bool), t *tally, first bool) (bool, error) {
	for ctx.Err() == nil {
		if !x.clock.Now().Before(until) {
			return false, nil
		}
		if err := x.conn.SetReadDeadline(until); err != nil {
			return false, fmt.Errorf("%w: %w", errSocket, err)
		}
		n, _, err := x.conn.ReadFrom(x.buf[:])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%w: receiving: %w", errSocket, err)
		}
		a, err := dhcpv6.MessageFromBytes(x.buf[:n])
		if err != nil || a.TransactionID != m.TransactionID || a.MessageType != want {
			continue
		}
		if cid := a.Options.ClientID(); cid == nil || !cid.Equal(x.id.DUID) {
			continue
		}
		if t == nil {
			continue
		}
		said, ok := hear(a)
		if !ok {
			continue
		}
		t.add(said)
		if first {
			return true, nil
		}
	}
	return false, ctx.Err()
}
