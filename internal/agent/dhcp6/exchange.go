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

// errNoAnswer: no acceptable answer before the deadline or the last
// transmission.
var errNoAnswer = errors.New("dhcp6: no answer")

// exchanger sends a client's messages and waits for their answers.
type exchanger struct {
	conn   Conn
	server net.Addr
	id     Identity
	clock  clock.Clock
	buf    [1500]byte
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

// exchange sends m and retransmits it (RFC 8415 15: the timeout doubles from
// rt[0] to rt[1], with jitter) until an answer of type want that accept
// takes (nil: any) comes, maxRC transmissions were made (0: no limit), or
// deadline passes (zero: none).
func (x *exchanger) exchange(ctx context.Context, m *dhcpv6.Message, want dhcpv6.MessageType, rt [2]time.Duration, maxRC int, deadline time.Time, accept func(*dhcpv6.Message) error) (*dhcpv6.Message, error) {
	start := x.clock.Now()
	timeouts := backoff.New(rt[0], rt[1])
	var last error
	for sent := 0; maxRC == 0 || sent < maxRC; sent++ {
		// Elapsed time, in hundredths of a second, saturating (RFC 8415 21.9).
		m.UpdateOption(dhcpv6.OptElapsedTime(min(x.clock.Since(start), 655350*time.Millisecond)))
		if _, err := x.conn.WriteTo(m.ToBytes(), x.server); err != nil {
			return nil, fmt.Errorf("%w: sending %s: %w", errSocket, m.MessageType, err)
		}
		until := x.clock.Now().Add(timeouts.Next())
		if !deadline.IsZero() && deadline.Before(until) {
			until = deadline
		}
		answer, err := x.await(ctx, m, want, until, accept)
		switch {
		case err == nil:
			return answer, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !errors.Is(err, errNoAnswer):
			return nil, err
		}
		last = err
		if !deadline.IsZero() && !x.clock.Now().Before(deadline) {
			break
		}
	}
	return nil, fmt.Errorf("%s: %w", m.MessageType, last)
}

// await reads until an answer to m of type want that accept takes, or until.
// Answers to other transactions, from other clients' exchanges or garbled,
// are dropped; the last reason an answer was not taken is in the error.
func (x *exchanger) await(ctx context.Context, m *dhcpv6.Message, want dhcpv6.MessageType, until time.Time, accept func(*dhcpv6.Message) error) (*dhcpv6.Message, error) {
	why := errNoAnswer
	for ctx.Err() == nil {
		if err := x.conn.SetReadDeadline(until); err != nil {
			return nil, fmt.Errorf("%w: %w", errSocket, err)
		}
		n, _, err := x.conn.ReadFrom(x.buf[:])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, why
		}
		if err != nil {
			return nil, fmt.Errorf("%w: receiving: %w", errSocket, err)
		}
		a, err := dhcpv6.MessageFromBytes(x.buf[:n])
		if err != nil || a.TransactionID != m.TransactionID || a.MessageType != want {
			continue
		}
		if cid := a.Options.ClientID(); cid == nil || !cid.Equal(x.id.DUID) {
			continue
		}
		if accept != nil {
			if err := accept(a); err != nil {
				why = fmt.Errorf("%w: %w", errNoAnswer, err)
				continue
			}
		}
		return a, nil
	}
	return nil, ctx.Err()
}

// collect sends m once and gathers every answer of type want that accept
// takes until window has passed: to hear whether servers contradict each
// other before one answer is believed.
func (x *exchanger) collect(ctx context.Context, m *dhcpv6.Message, want dhcpv6.MessageType, window time.Duration, accept func(*dhcpv6.Message) error) ([]*dhcpv6.Message, error) {
	if _, err := x.conn.WriteTo(m.ToBytes(), x.server); err != nil {
		return nil, fmt.Errorf("%w: sending %s: %w", errSocket, m.MessageType, err)
	}
	var got []*dhcpv6.Message
	until := x.clock.Now().Add(window)
	_, err := x.await(ctx, m, want, until, func(a *dhcpv6.Message) error {
		if err := accept(a); err != nil {
			return err
		}
		if len(got) < maxCollected {
			got = append(got, a)
		}
		return errCollecting
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if errors.Is(err, errSocket) {
		return nil, err
	}
	return got, nil
}

// errCollecting keeps await reading after an answer was taken.
var errCollecting = errors.New("dhcp6: collecting")

// maxCollected bounds the answers one collection keeps: any host can answer.
const maxCollected = 16
