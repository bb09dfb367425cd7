package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/renumber/renumber/tools/world"
)

// The metrics port against a host that holds connections: 5,000 TLS
// connections to a guarded agent on its node's address, each with one
// request answered (a keep-alive connection, then idle), held. The agent's
// RSS before, with them all opened, and after they idled past the server's
// timeouts; how many the agent still held open.

type idleCost struct {
	At        string  `json:"measuredAt"`
	Conns     int     `json:"connections"`
	Opened    int     `json:"opened"`
	Before    float64 `json:"beforeRSSMiB"`
	Held      float64 `json:"heldRSSMiB"`
	After     float64 `json:"afterRSSMiB"`
	OpenAfter int     `json:"stillOpenAfter"`
	Wait      float64 `json:"waitSeconds"`
}

func runIdle(ctx context.Context, conns int) (*idleCost, error) {
	agentBin, _, err := binaries()
	if err != nil {
		return nil, err
	}
	progress("idle: 1 node, a guarded agent, %d idle TLS connections to its metrics port", conns)
	w, err := startInstalledWorld(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: fresh(0), Valid: 30 * time.Minute, Preferred: 20 * time.Minute}); err != nil {
		return nil, err
	}
	n := w.Net.Nodes[0]
	addr := net.JoinHostPort(n.ControlAddr.String(), "9470")
	agent, err := w.StartAgent(ctx, agentBin, n.Name, "--metrics-addr", addr, "--metrics-auth", "kubernetes")
	if err != nil {
		return nil, err
	}
	if err := reported(ctx, w, n.Name, fresh(0)); err != nil {
		return nil, fmt.Errorf("idle: %w", err)
	}
	c := &idleCost{At: time.Now().UTC().Format(time.RFC3339), Conns: conns, Before: memory(agent.Process.Pid).rss}
	held := holdConns(ctx, addr, conns)
	defer func() {
		for _, h := range held {
			_ = h.Close()
		}
	}()
	c.Opened = len(held)
	c.Held = memory(agent.Process.Pid).rss
	progress("idle: %d of %d connections opened and answered; agent %.1f MiB (%.1f before)", c.Opened, conns, c.Held, c.Before)
	// Past the server's idle timeout (45 s) and a GC cycle's worth more.
	wait := time.Minute
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(wait):
	}
	c.Wait = wait.Seconds()
	c.After = memory(agent.Process.Pid).rss
	for _, h := range held {
		if open(h) {
			c.OpenAfter++
		}
	}
	progress("idle: after %s agent %.1f MiB, %d connections still open", wait, c.After, c.OpenAfter)
	return c, nil
}

// holdConns opens up to n TLS connections to addr, each answering one
// request over keep-alive, 200 at a time; the ones that failed are left out.
func holdConns(ctx context.Context, addr string, n int) []*tls.Conn {
	var (
		mu   sync.Mutex
		out  []*tls.Conn
		wg   sync.WaitGroup
		gate = make(chan struct{}, 200)
	)
	for range n {
		wg.Add(1)
		gate <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-gate }()
			d := &net.Dialer{Timeout: 5 * time.Second}
			raw, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true})
			_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := tc.Write([]byte("GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n")); err != nil {
				_ = tc.Close()
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
			if err != nil {
				_ = tc.Close()
				return
			}
			_ = resp.Body.Close()
			_ = tc.SetDeadline(time.Time{})
			mu.Lock()
			out = append(out, tc)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// open reports whether the server still holds c: a read that times out
// (nothing to read, not closed).
func open(c *tls.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func writeIdle(b *strings.Builder, c *idleCost) {
	fmt.Fprintf(b, "\n## Idle connections to the metrics port (measured %s)\n\n", c.At)
	fmt.Fprintf(b, "One guarded agent (`--metrics-auth=kubernetes`) on its node's address; one host opens %d TLS connections to it (%d got a TLS handshake and an answer to one request over keep-alive; the others were closed first), and holds them.\n\n", c.Conns, c.Opened)
	b.WriteString("| agent RSS MiB before | with the connections held | after " + fmt.Sprintf("%.0f s", c.Wait) + " | connections the agent still held |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| %.1f | %.1f | %.1f | %d |\n", c.Before, c.Held, c.After, c.OpenAfter)
}
