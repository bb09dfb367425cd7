package metrics

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// served starts a TLS metrics server on loopback with short timeouts and
// returns its address.
func served(t *testing.T, conns *Conns) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := SelfSigned("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ep := Endpoint{Listener: l, TLS: cfg, Conns: conns,
		Timeouts: Timeouts{Header: 50 * time.Millisecond, Read: 50 * time.Millisecond, Write: time.Second, Idle: 50 * time.Millisecond}}
	go func() {
		_ = Serve(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), ep, NewRegistry(), nil, nil, nil)
	}()
	return l.Addr().String()
}

// closedByServer reads from c until the server closes it; the deadline is
// only a backstop for a server that never does (it fails the test).
func closedByServer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%s: still open; the server never closed it", what)
	}
}

// What a host on the LAN holds open, the server closes: a connection that
// never shakes hands, one that sends half a request, and an idle keep-alive
// connection after its scrape.
func TestTheServerClosesConnectionsThatHoldOn(t *testing.T) {
	addr := served(t, nil)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	closedByServer(t, dial(), "a connection that says nothing")

	half := tls.Client(dial(), &tls.Config{InsecureSkipVerify: true})
	if _, err := half.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	closedByServer(t, half, "half a request")

	idle := tls.Client(dial(), &tls.Config{InsecureSkipVerify: true})
	if _, err := idle.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.Close {
		t.Fatal("the server closed the connection after the request: no keep-alive to test")
	}
	closedByServer(t, idle, "an idle keep-alive connection")
}

// The cap holds on a real server: the connections past it are closed, by
// the server, as they come.
func TestTheServerClosesConnectionsPastItsCap(t *testing.T) {
	conns := &Conns{Max: 4, PerClient: 4}
	addr := served(t, conns)
	var held []net.Conn
	for range 10 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		held = append(held, c)
	}
	for i, c := range held[:6] {
		closedByServer(t, c, "connection "+string(rune('0'+i)))
	}
	if got := conns.Open(); got > conns.Max {
		t.Errorf("%d open, cap %d", got, conns.Max)
	}
}
