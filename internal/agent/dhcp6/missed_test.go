package dhcp6

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	clocktesting "k8s.io/utils/clock/testing"
)

// queueConn is a listener whose queue holds pkts, then nothing (drained
// closes) until it is closed; dropped[i] is what its queue dropped unread
// by the time pkts[i] was read (a packet socket's PACKET_STATISTICS).
type queueConn struct {
	pkts    [][]byte
	dropped []int
	read    int
	drained chan struct{}
	closed  chan struct{}
}

func (q *queueConn) ReadFrom(b []byte) (int, net.Addr, error) {
	if q.read < len(q.pkts) {
		q.read++
		return copy(b, q.pkts[q.read-1]), nil, nil
	}
	if q.read == len(q.pkts) {
		q.read++
		close(q.drained)
	}
	<-q.closed
	return 0, nil, net.ErrClosed
}

func (q *queueConn) Dropped() (int, error)                 { return q.dropped[q.read-1], nil }
func (q *queueConn) WriteTo([]byte, net.Addr) (int, error) { return 0, net.ErrClosed }
func (q *queueConn) SetReadDeadline(time.Time) error       { return nil }
func (q *queueConn) Close() error {
	select {
	case <-q.closed:
	default:
		close(q.closed)
	}
	return nil
}

// A flood the Watch reads slower than it comes loses packets in the
// socket's queue, a Release among them perhaps: each drop the queue
// counts is told to Missed with the next packet read, and warned of once
// an episode; it is no impersonation (nothing says one was dropped).
func TestTheWatchTellsWhatItsQueueDropped(t *testing.T) {
	w, log := loggedWatch(t)
	impersonated := 0
	w.Impersonated = func(time.Time) { impersonated++ }
	missed := make(chan int, 8)
	w.Missed = func(n int, _ time.Time) { missed <- n }
	other, _ := IdentityFor("00000000-0000-4000-8000-000000000001", "home")
	junk := ipv6Packet(allServers, nil, ServerPort, clientMessage(dhcpv6.MessageTypeRelease, other, other.IAID, 9, pdA).ToBytes(), 0)
	conn := &queueConn{pkts: [][]byte{junk, junk, junk, junk}, dropped: []int{0, 5, 0, 2}, drained: make(chan struct{}), closed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, conn, clocktesting.NewFakeClock(time.Unix(1e9, 0))) }()
	<-conn.drained
	cancel()
	<-done
	close(missed)
	var got []int
	for n := range missed {
		got = append(got, n)
	}
	if diff := cmp.Diff([]int{5, 2}, got); diff != "" {
		t.Errorf("told Missed (-want +got):\n%s", diff)
	}
	if n := strings.Count(log.String(), "dropped unheard"); n != 1 {
		t.Errorf("%d warnings of drops, want 1 (one episode):\n%s", n, log)
	}
	if impersonated != 0 {
		t.Errorf("%d impersonations reported, want none", impersonated)
	}
}
