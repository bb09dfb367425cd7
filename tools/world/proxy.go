package world

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// WatchProxy sits in front of the API server. Silence makes every watch stream,
// open or new, deliver nothing while staying connected; other requests pass.
// It serves the API server's own certificate, so clients verify it unchanged.
type WatchProxy struct {
	URL    string
	silent atomic.Bool
	srv    *http.Server
}

// Silence stops (true) or resumes (false) forwarding watch events.
func (p *WatchProxy) Silence(on bool) { p.silent.Store(on) }

// NewWatchProxy starts a proxy on the world's host address; Close stops it.
func (cp *ControlPlane) NewWatchProxy() (*WatchProxy, error) {
	ca, err := os.ReadFile(cp.pki.CAFile)
	if err != nil {
		return nil, err
	}
	// Bound before its URL is known: a port chosen and closed first can be
	// taken by the clients' connections from this address in between.
	l, err := net.Listen("tcp", netip.AddrPortFrom(cp.w.Net.HostAddr, 0).String())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	upstream := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	p := &WatchProxy{URL: "https://" + l.Addr().String()}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "https", cp.URL[len("https://"):]
		resp, err := upstream.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		watch := r.URL.Query().Get("watch")
		if watch != "true" && watch != "1" {
			_, _ = io.Copy(w, resp.Body)
			return
		}
		flusher, _ := w.(http.Flusher)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 && !p.silent.Load() {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				if flusher != nil {
					flusher.Flush()
				}
			}
			if err != nil {
				return
			}
		}
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := p.srv.ServeTLS(l, cp.pki.ServingCert, cp.pki.ServingKey); !errors.Is(err, http.ErrServerClosed) {
			cp.w.logf("watch proxy: %v", err)
		}
	}()
	return p, nil
}

// Close stops the proxy.
func (p *WatchProxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	_ = p.srv.Close()
}

// Via returns a copy of id whose kubeconfig and config point at url (a proxy).
func (cp *ControlPlane) Via(id *Identity, url, name string) (*Identity, error) {
	out := *id
	cfg := *id.Config
	cfg.Host = url
	out.Config = &cfg
	out.Kubeconfig = filepath.Join(cp.w.Dir, name+".kubeconfig")
	return &out, cp.writeKubeconfigTo(out.Kubeconfig, url, name, map[string]string{"token": id.Config.BearerToken})
}
