// Package kubehttp is the agent's Kubernetes API client, on net/http and
// encoding/json alone: it merge-patches an object, and lists and watches a
// collection (configured by package kubeconfig). client-go and apimachinery
// link about 300 packages for the same jobs, and a binary's pages are most of
// a small process's resident memory (bench/results.md).
package kubehttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/agent/kubeconfig"
)

// requestTimeout bounds every request but a watch: a hung API server must not
// hold a patch (and the publisher behind it) forever.
const requestTimeout = 30 * time.Second

// Client talks to one API server.
type Client struct {
	server *url.URL
	http   *http.Client
	cfg    kubeconfig.Config
}

// New returns a client for cfg; wrap, when non-nil, wraps its transport (for
// counting, see Counting).
func New(cfg *kubeconfig.Config, wrap func(http.RoundTripper) http.RoundTripper) (*Client, error) {
	u, err := url.Parse(cfg.Server)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("kubehttp: server %q is not an http(s) URL", cfg.Server)
	}
	if u.Scheme == "http" && (cfg.Token != "" || cfg.TokenFile != "") {
		// Anyone on the path would read the token, and with it patch Nodes.
		return nil, fmt.Errorf("kubehttp: server %q is plain http: a bearer token is only sent over https", cfg.Server)
	}
	tc := &tls.Config{InsecureSkipVerify: cfg.Insecure, ServerName: cfg.ServerName, MinVersion: tls.VersionTLS12} //nolint:gosec // only when the kubeconfig says so
	if cfg.CA != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CA) {
			return nil, errors.New("kubehttp: no PEM certificate in the certificate authority")
		}
		tc.RootCAs = pool
	}
	if cfg.CertPEM != nil {
		cert, err := tls.X509KeyPair(cfg.CertPEM, cfg.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("kubehttp: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	var rt http.RoundTripper = &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
		// A watch on a connection that died silently (a NAT or the API server's
		// host gone) is noticed by pings, as client-go does.
		HTTP2: &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second},
	}
	if wrap != nil {
		rt = wrap(rt)
	}
	return &Client{server: u, http: &http.Client{Transport: rt}, cfg: *cfg}, nil
}

// StatusError is a response other than 2xx, with the API server's Status.
type StatusError struct {
	Method, Path string
	Code         int
	Reason       string
	Message      string
}

func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Code)
	}
	return fmt.Sprintf("kubehttp: %s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, msg)
}

// IsGone reports whether err is the server's 410: the resourceVersion asked for
// is older than what it keeps.
func IsGone(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusGone
}

// MergePatch applies a JSON merge patch to the object at path.
func (c *Client) MergePatch(ctx context.Context, path string, patch []byte) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.do(ctx, http.MethodPatch, path, nil, "application/json", "application/merge-patch+json", bytes.NewReader(patch))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// do sends one request and returns the response of a 2xx, or a *StatusError.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, accept, contentType string, body io.Reader) (*http.Response, error) {
	u := *c.server
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("kubehttp: %w", err)
	}
	req.Header.Set("Accept", accept)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.cfg.UserAgent != "" {
		req.Header.Set("User-Agent", c.cfg.UserAgent)
	}
	token := c.cfg.Token
	if c.cfg.TokenFile != "" {
		b, err := os.ReadFile(c.cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("kubehttp: token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kubehttp: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	se := &StatusError{Method: method, Path: path, Code: resp.StatusCode}
	var st status
	if json.Unmarshal(b, &st) == nil && st.Kind == "Status" {
		se.Reason, se.Message = st.Reason, st.Message
	}
	return nil, se
}

// status is metav1.Status, the fields read.
type status struct {
	Kind    string `json:"kind"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Create posts in as JSON to the collection at path and decodes the answer
// into out.
func (c *Client) Create(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("kubehttp: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.do(ctx, http.MethodPost, path, nil, "application/json", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("kubehttp: POST %s: %w", path, err)
	}
	return nil
}
