package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ContentType is the text exposition format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Check reports nil when healthy.
type Check func(*http.Request) error

// Endpoint is where and how the metrics server listens.
type Endpoint struct {
	Addr string
	// Listener, when set, is listened on instead of Addr (tests).
	Listener net.Listener
	// TLS, when set, serves HTTPS (SelfSigned, or Issued by the install's CA).
	TLS *tls.Config
	// Guard, when set, admits only scrapes it allows to /metrics; the health
	// checks stay open (the kubelet probes them without a token).
	Guard *Guard
	// Conns, when set, caps the connections held open (NewConns).
	Conns *Conns
	// Timeouts bounds every connection; zero fields are DefaultTimeouts'.
	Timeouts Timeouts
}

// Timeouts bound each connection to the metrics port, whoever opened it.
type Timeouts struct {
	// Header: a TLS handshake, and then a request's headers, must arrive
	// within it (a connection that says nothing is closed after it).
	Header time.Duration
	// Read: a whole request; Write: its answer; Idle: a keep-alive
	// connection's wait for the next request.
	Read, Write, Idle time.Duration
}

// DefaultTimeouts: 5 s for a handshake or a request's headers, 10 s for a
// request, 30 s for its answer (the bench takes a 20 s CPU profile from the
// writer), and 45 s idle - longer than Prometheus's 30 s interval, so a
// scraper keeps its connection rather than shaking hands every scrape.
var DefaultTimeouts = Timeouts{Header: 5 * time.Second, Read: 10 * time.Second, Write: 30 * time.Second, Idle: 45 * time.Second}

// MaxHeaderBytes bounds a request's line and headers on the metrics port. A
// scrape's are under 2 KiB (a projected token's Authorization is the
// largest, some 1.3 KiB); net/http holds a header line whole while it reads
// it, so Go's default of 1 MiB let 64 connections hold 72-127 MiB of heap
// (TestHeadersBeingSentCostLittleMemory). net/http reads up to 4 KiB past it
// before answering 431 and closing.
const MaxHeaderBytes = 8 << 10

// server is the metrics port's http.Server: its timeouts, its header bound, and HTTP/1.1 only
// (an HTTP/2 connection multiplexes requests past the per-connection bounds,
// and has timeouts of its own; scrapers speak HTTP/1.1).
// Its errors (a handshake cut short, a header timeout) are the LAN's doing,
// as many as it likes: they are logged at debug, not printed each.
func server(log *slog.Logger, h http.Handler, cfg *tls.Config, t Timeouts) *http.Server {
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	return &http.Server{Handler: h, TLSConfig: cfg, Protocols: &protocols, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnContext:       withConnOf,
		ReadHeaderTimeout: or(t.Header, DefaultTimeouts.Header), ReadTimeout: or(t.Read, DefaultTimeouts.Read),
		WriteTimeout: or(t.Write, DefaultTimeouts.Write), IdleTimeout: or(t.Idle, DefaultTimeouts.Idle)}
}

// Serve serves /metrics, /healthz and /readyz at ep until ctx ends, and the
// extra handlers by path (the writer's Go profiles: net/http/pprof is not linked
// into the agent, where it cost 0.5 MB of binary and of resident memory).
func Serve(ctx context.Context, log *slog.Logger, ep Endpoint, reg *Registry, healthz, readyz Check, extra map[string]http.HandlerFunc) error {
	mux := http.NewServeMux()
	var scrape http.Handler = reg
	if ep.Guard != nil {
		scrape = ep.Guard.Wrap(reg)
	}
	mux.Handle("/metrics", scrape)
	mux.HandleFunc("/healthz", handle(healthz))
	mux.HandleFunc("/readyz", handle(readyz))
	for path, h := range extra {
		var handler http.Handler = h
		if ep.Guard != nil { // profiles and plans say as much as the metrics
			handler = ep.Guard.Wrap(h)
		}
		mux.Handle(path, handler)
	}
	l := ep.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", ep.Addr); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	if ep.Conns != nil {
		l = ep.Conns.Listen(l)
	}
	srv := server(log, mux, ep.TLS, ep.Timeouts)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Debug("serving metrics and health", "addr", l.Addr(), "tls", ep.TLS != nil, "guarded", ep.Guard != nil)
	var err error
	if ep.TLS != nil {
		err = srv.ServeTLS(l, "", "")
	} else {
		err = srv.Serve(l)
	}
	if !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// Start runs Serve in the background; a failure is logged (the health checks
// then go unanswered, and the kubelet restarts the Pod).
func Start(ctx context.Context, log *slog.Logger, ep Endpoint, reg *Registry, healthz, readyz Check, extra map[string]http.HandlerFunc) {
	go func() {
		if err := Serve(ctx, log, ep, reg, healthz, readyz, extra); err != nil {
			log.Error("metrics server stopped", "err", err)
		}
	}()
}

// ServeHTTP answers a scrape.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", ContentType)
	_, _ = w.Write(r.Text())
}

func handle(c Check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c != nil {
			if err := c(r); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	}
}
