// Package requests counts every API request a process makes (verb, resource,
// response code) with a wrapper on its HTTP transport, and refuses writes while a
// gate is closed: the writer closes it the moment it stops leading. Both binaries
// use it, so the agent's and the writer's requests are counted alike.
package requests

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/renumber/renumber/internal/metrics"
)

// ErrGateClosed is returned, without contacting the API server, for a write
// attempted while the gate is closed.
var ErrGateClosed = errors.New("requests: write refused: not the leader")

// Gate decides whether mutating requests may start now.
type Gate interface{ Open() bool }

// NewCounter returns the counter Counting expects, named for the component.
func NewCounter(component string) *metrics.CounterVec {
	return metrics.NewCounterVec("renumber_"+component+"_api_requests_total", "API requests this process made, by verb, resource and response code (writes refused by the leader gate have code \"gated\").", "verb", "resource", "code")
}

// Counting wraps next so that every request is counted in c, and every write is
// refused when gate is non-nil and closed.
func Counting(next http.RoundTripper, c *metrics.CounterVec, gate Gate) http.RoundTripper {
	return &transport{next: next, count: c, gate: gate}
}

type transport struct {
	next  http.RoundTripper
	count *metrics.CounterVec
	gate  Gate
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := Describe(req.Method, req.URL.Path, req.URL.Query().Get("watch") == "true")
	if t.gate != nil && IsWrite(verb) && !t.gate.Open() {
		t.count.With(verb, resource, "gated").Inc()
		return nil, ErrGateClosed
	}
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	t.count.With(verb, resource, code).Inc()
	return resp, err
}

// IsWrite reports whether verb mutates.
func IsWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete":
		return true
	}
	return false
}

// Describe names a request the way the audit log does: verb and resource (with
// "/subresource"). Lists and gets are both "get" here: the path alone cannot tell
// them apart without discovery, and only writes matter for budgets.
func Describe(method, path string, watch bool) (verb, resource string) {
	switch method {
	case http.MethodGet:
		verb = "get"
		if watch {
			verb = "watch"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(method)
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return verb, "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return verb, "other"
	}
	resource = parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	return verb, resource
}
