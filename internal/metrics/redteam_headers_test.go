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
	"testing"
	"time"
)

// Red team (issue 42 item 14, the metrics port): the caps bound how many
// connections the LAN holds (8 a client, 64 in all) and the timeouts how
// long, but not what one connection costs while it sends its headers:
// http.Server's default MaxHeaderBytes is 1 MiB, and net/http keeps a header
// line whole while it reads it. A scrape's headers are under 1 KiB.
//
// 64 connections from 8 clients (127.0.N.1: eight /24s on loopback, as eight
// subnets of a LAN, or one IPv6 host that advertised itself seven more
// on-link /64s the node's kernel accepts), each sending the request line and
// one header of just under 1 MiB and holding it: the heap they hold must stay
// small beside the agent's 48 MiB GOMEMLIMIT and 64 MiB limit. The header
// timeout is lengthened here so that the reading, not the clock, is measured
// (5 s is ample to send 1 MiB on a LAN).
func TestHeadersBeingSentCostLittleMemory(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP", true: "HTTPS"}[tlsOn], func(t *testing.T) { headersBeingSent(t, tlsOn) })
	}
}

func headersBeingSent(t *testing.T, tlsOn bool) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	conns := NewConns("redteam")
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

	pad := strings.Repeat("a", 1<<20-1024)
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
			go func() { _, _ = fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: node\r\nX-Pad: %s", pad) }()
		}
	}
	defer func() { // the next case measures from a clean heap
		for _, c := range held {
			_ = c.Close()
		}
		for i := 0; conns.Open() > 0 && i < 100; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}()
	// The server reads at its own pace: watch the heap until it stops
	// growing (or is far past the bound).
	var peak uint64
	for range 100 {
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > before && ms.HeapAlloc-before > peak {
			peak = ms.HeapAlloc - before
		}
	}
	t.Logf("%d connections open, heap %.1f MiB above the start", conns.Open(), float64(peak)/(1<<20))
	if bound := uint64(len(held)) * 64 << 10; peak > bound {
		t.Errorf("%d connections sending their headers hold %.1f MiB of heap, over %d KiB each (%.1f MiB)",
			len(held), float64(peak)/(1<<20), 64, float64(bound)/(1<<20))
	}
}
