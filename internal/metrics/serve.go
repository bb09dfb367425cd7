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
	// TLS, when set, serves HTTPS (SelfSigned).
	TLS *tls.Config
	// Guard, when set, admits only scrapes it allows to /metrics; the health
	// checks stay open (the kubelet probes them without a token).
	Guard *Guard
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
	l, err := net.Listen("tcp", ep.Addr)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, TLSConfig: ep.TLS}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Debug("serving metrics and health", "addr", l.Addr(), "tls", ep.TLS != nil, "guarded", ep.Guard != nil)
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
