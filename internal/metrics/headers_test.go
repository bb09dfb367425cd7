package metrics

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The caps bound how many connections the LAN holds (8 a client, 64 in
// all) and the timeouts how long; what one connection costs while it sends
// its headers is bounded by the server's MaxHeaderBytes. net/http keeps a
// header line whole while it reads it, up to MaxHeaderBytes (Go's default:
// 1 MiB, which made 64 connections hold 72-127 MiB of heap, past the
// agent's 64 MiB limit). A scrape's headers are under 2 KiB (a projected
// token's Authorization is the largest).
//
// 64 connections from 8 clients (127.0.N.1: eight /24s on loopback, as eight
// subnets of a LAN), each sending the request line and one header of just
// under 1 MiB and holding it: once the server has read all of each, or
// closed it, the heap they hold must stay small beside the agent's 48 MiB
// GOMEMLIMIT and 64 MiB limit. The header timeout is lengthened so that the
// reading, not the clock, is what is measured.
func TestHeadersBeingSentCostLittleMemory(t *testing.T) {
	for _, header := range []struct {
		name string
		size int
	}{{"1 MiB (answered 431 and closed)", 1<<20 - 1024}, {"just within MaxHeaderBytes (held)", MaxHeaderBytes - 1024}} {
		for _, tlsOn := range []bool{false, true} {
			t.Run(header.name+map[bool]string{false: ", HTTP", true: ", HTTPS"}[tlsOn], func(t *testing.T) { headersBeingSent(t, header.size, tlsOn) })
		}
	}
}

func headersBeingSent(t *testing.T, size int, tlsOn bool) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("a", size)
	request := fmt.Sprintf("GET /metrics HTTP/1.1\r\nHost: node\r\nX-Pad: %s", pad)
	l := &watched{Listener: inner, enough: int64(len(request)), settled: make(chan struct{}, 64), closed: make(chan struct{}, 64)}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	conns := NewConns("test")
	ep := Endpoint{Listener: l, Conns: conns, Timeouts: Timeouts{Header: time.Minute, Read: time.Minute}}
	if tlsOn {
		if ep.TLS, err = SelfSigned("renumber-metrics", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		_ = Serve(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), ep, NewRegistry(), nil, nil, nil)
	}()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc

	var held []net.Conn
	for client := 1; client <= 8; client++ {
		for range conns.PerClient {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(client), 1)}}
			c, err := d.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			if tlsOn {
				c = tls.Client(c, &tls.Config{InsecureSkipVerify: true}) // the LAN host checks nothing
			}
			held = append(held, c)
			go func() { _, _ = io.WriteString(c, request) }()
		}
	}
	defer func() { // the next case measures from a clean heap
		for _, c := range held {
			_ = c.Close()
		}
		for range held {
			<-l.closed
		}
	}()
	// Each connection settles when the server has read as many bytes as
	// were sent (it holds them all), or closes it.
	for range held {
		<-l.settled
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	var grew uint64
	if ms.HeapAlloc > before {
		grew = ms.HeapAlloc - before
	}
	t.Logf("%d connections settled, %d still open; heap %.1f MiB above the start (%.1f KiB each)",
		len(held), conns.Open(), float64(grew)/(1<<20), float64(grew)/float64(len(held))/(1<<10))
	if bound := uint64(len(held)) * 64 << 10; grew > bound {
		t.Errorf("%d connections sending their headers hold %.1f MiB of heap, over %d KiB each (%.1f MiB)",
			len(held), float64(grew)/(1<<20), 64, float64(bound)/(1<<20))
	}
}

// watched is a listener whose connections report, once each, when the
// server has read enough bytes from one or closed it (settled), and when it
// closed it (closed).
type watched struct {
	net.Listener
	enough          int64
	settled, closed chan struct{}
}

func (l *watched) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, l: l}, nil
}

type watchedConn struct {
	net.Conn
	l    *watched
	mu   sync.Mutex
	read int64
	once sync.Once
	shut sync.Once
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	c.read += int64(n)
	enough := c.read >= c.l.enough
	c.mu.Unlock()
	if enough {
		c.settle()
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.settle()
	c.shut.Do(func() { c.l.closed <- struct{}{} })
	return c.Conn.Close()
}

func (c *watchedConn) settle() { c.once.Do(func() { c.l.settled <- struct{}{} }) }
