package kubehttp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/kubeconfig"
)

func obj(name, rv string) string {
	return fmt.Sprintf(`{"metadata":{"name":%q,"resourceVersion":%q}}`, name, rv)
}

func ev(typ, object string) event { return event{Type: typ, Object: json.RawMessage(object)} }

func TestApply(t *testing.T) {
	tests := []struct {
		name        string
		store       []string // names present before, at resourceVersion 1
		ev          event
		wantChanged bool
		wantRV      string
		wantNames   []string
		wantErr     string
		wantGone    bool
	}{
		{"added", nil, ev("ADDED", obj("a", "5")), true, "5", []string{"a"}, "", false},
		{"modified", []string{"a"}, ev("MODIFIED", obj("a", "6")), true, "6", []string{"a"}, "", false},
		{"modified to the same bytes", []string{"a"}, ev("MODIFIED", obj("a", "1")), false, "1", []string{"a"}, "", false},
		{"deleted", []string{"a", "b"}, ev("DELETED", obj("a", "7")), true, "7", []string{"b"}, "", false},
		{"deleted unknown", []string{"b"}, ev("DELETED", obj("a", "7")), false, "7", []string{"b"}, "", false},
		{"namespaced key", nil, ev("ADDED", `{"metadata":{"name":"a","namespace":"ns","resourceVersion":"8"}}`), true, "8", []string{"ns/a"}, "", false},
		{"bookmark moves the version only", []string{"a"}, ev("BOOKMARK", `{"metadata":{"resourceVersion":"9"}}`), false, "9", []string{"a"}, "", false},
		{"bookmark without version", nil, ev("BOOKMARK", `{"metadata":{}}`), false, "1", nil, "BOOKMARK without", false},
		{"gone", []string{"a"}, ev("ERROR", `{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"}`), false, "1", []string{"a"}, "410 Expired", true},
		{"other error", nil, ev("ERROR", `{"kind":"Status","code":500,"reason":"InternalError"}`), false, "1", nil, "500", false},
		{"malformed error", nil, ev("ERROR", `"boom"`), false, "1", nil, "malformed ERROR", false},
		{"unknown type", nil, ev("SNAPSHOT", obj("a", "2")), false, "1", nil, "unknown event type", false},
		{"object without a name", nil, ev("ADDED", `{"metadata":{"resourceVersion":"2"}}`), false, "1", nil, "without metadata.name", false},
		{"object not JSON", nil, ev("ADDED", `[1]`), false, "1", nil, "ADDED event", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := Objects{}
			for _, n := range tt.store {
				store[n] = json.RawMessage(obj(n, "1"))
			}
			rv := "1"
			changed, err := apply(store, &rv, tt.ev)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if IsGone(err) != tt.wantGone {
				t.Errorf("IsGone = %v", IsGone(err))
			}
			if changed != tt.wantChanged || rv != tt.wantRV {
				t.Errorf("changed %v rv %s, want %v %s", changed, rv, tt.wantChanged, tt.wantRV)
			}
			if got := slices.Sorted(maps.Keys(store)); !slices.Equal(got, tt.wantNames) && len(got)+len(tt.wantNames) > 0 {
				t.Errorf("store = %v, want %v", got, tt.wantNames)
			}
		})
	}
}

func TestDecodeList(t *testing.T) {
	objs, rv, err := decodeList(strings.NewReader(`{"kind":"NodeList","metadata":{"resourceVersion":"42"},"items":[` + obj("a", "40") + `,` + obj("b", "41") + `]}`))
	if err != nil || rv != "42" || len(objs) != 2 || string(objs["b"]) != obj("b", "41") {
		t.Fatalf("decodeList = %v, %q, %v", objs, rv, err)
	}
	for _, bad := range []string{`{"items":[]}`, `{"metadata":{"resourceVersion":"1"},"items":[{}]}`, `[`} {
		if _, _, err := decodeList(strings.NewReader(bad)); err == nil {
			t.Errorf("decodeList(%s) accepted", bad)
		}
	}
}

// FuzzApply: any watch event, however garbled, is an error or a change to the
// store - never a panic - and an error leaves the store as it was.
func FuzzApply(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":` + obj("a", "2") + `}`))
	f.Add([]byte(`{"type":"ERROR","object":{"kind":"Status","code":410}}`))
	f.Add([]byte(`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"3"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var e event
		if json.Unmarshal(data, &e) != nil {
			return
		}
		store := Objects{"a": json.RawMessage(obj("a", "1"))}
		rv := "1"
		if _, err := apply(store, &rv, e); err != nil && (len(store) != 1 || rv != "1" || string(store["a"]) != obj("a", "1")) {
			t.Fatalf("error %v changed the store: %v %s", err, store, rv)
		}
	})
}

// apiServer answers lists and watches from a script: each request takes the
// next response. It is a stand-in for the protocol's rare paths (a 410, a
// watch cut short) that a real API server gives only after etcd compaction;
// the agent's e2e tests run the common ones against the real thing.
type apiServer struct {
	mu        sync.Mutex
	responses []string // bodies; "hang" keeps the watch open until the client leaves
	requests  []string // "list" or "watch@<resourceVersion>"
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	req := "list"
	if r.URL.Query().Get("watch") == "true" {
		req = "watch@" + r.URL.Query().Get("resourceVersion")
	}
	s.requests = append(s.requests, req)
	body := "hang"
	if len(s.responses) > 0 {
		body, s.responses = s.responses[0], s.responses[1:]
	}
	s.mu.Unlock()
	if body == "hang" {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	_, _ = io.WriteString(w, body)
}

func (s *apiServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func watchEvents(evs ...string) string { return strings.Join(evs, "\n") }

// runWatch watches srv until onChange has been called calls times and the
// server has seen requests requests, and returns the names each call held.
func runWatch(t *testing.T, srv *apiServer, calls, requests int) [][]string {
	t.Helper()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, err := New(&kubeconfig.Config{Server: ts.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan []string, 16)
	c.Watch(ctx, Collection{Path: "/api/v1/nodes"}, slog.New(slog.DiscardHandler), func(o Objects) {
		got <- slices.Sorted(maps.Keys(o))
	})
	var out [][]string
	deadline := time.After(30 * time.Second)
	for len(out) < calls || len(srv.seen()) < requests {
		select {
		case names := <-got:
			out = append(out, names)
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("onChange calls %v, want %d; requests %v, want %d", out, calls, srv.seen(), requests)
		}
	}
	return out
}

func TestWatchListsAgainWhenItsVersionIsGone(t *testing.T) {
	srv := &apiServer{responses: []string{
		`{"metadata":{"resourceVersion":"10"},"items":[` + obj("a", "9") + `]}`,
		`{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}`,
		`{"metadata":{"resourceVersion":"20"},"items":[` + obj("a", "9") + `,` + obj("b", "19") + `]}`,
		`{"type":"ADDED","object":` + obj("c", "21") + `}`,
		"hang",
	}}
	calls := runWatch(t, srv, 3, 5)
	want := [][]string{{"a"}, {"a", "b"}, {"a", "b", "c"}}
	if !slices.EqualFunc(calls, want, slices.Equal) {
		t.Errorf("onChange calls %v, want %v", calls, want)
	}
	if got, want := srv.seen(), []string{"list", "watch@10", "list", "watch@20", "watch@21"}; !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
}

func TestWatchResumesFromTheLastVersionSeen(t *testing.T) {
	srv := &apiServer{responses: []string{
		`{"metadata":{"resourceVersion":"10"},"items":[]}`,
		watchEvents(`{"type":"ADDED","object":`+obj("a", "11")+`}`, `{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"15"}}}`),
		watchEvents(`{"type":"DELETED","object":` + obj("a", "16") + `}`),
		"hang",
	}}
	calls := runWatch(t, srv, 3, 4)
	want := [][]string{{}, {"a"}, {}}
	if !slices.EqualFunc(calls, want, slices.Equal) {
		t.Errorf("onChange calls %v, want %v", calls, want)
	}
	// A watch that ends is resumed from the last version (a bookmark's too),
	// without a list.
	if got, want := srv.seen(), []string{"list", "watch@10", "watch@15", "watch@16"}; !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
}

func TestErrorsCarryTheServersStatus(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/merge-patch+json" || r.Header.Get("Authorization") != "Bearer t0k" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"kind":"Status","status":"Failure","message":"nodes \"x\" not found","reason":"NotFound","code":404}`)
	}))
	defer ts.Close()
	c, err := New(&kubeconfig.Config{Server: ts.URL, Token: "t0k", Insecure: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.MergePatch(t.Context(), "/api/v1/nodes/x", []byte(`{}`))
	want := `kubehttp: PATCH /api/v1/nodes/x: 404 NotFound: nodes "x" not found`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

// A bearer token is never sent over plain http: anyone on the path would
// read it, and with it patch Nodes.
func TestATokenIsNeverSentOverPlainHTTP(t *testing.T) {
	for _, cfg := range []kubeconfig.Config{
		{Server: "http://192.0.2.1:6443", Token: "t0k"},
		{Server: "http://192.0.2.1:6443", TokenFile: "/var/run/secrets/token"},
	} {
		if _, err := New(&cfg, nil); err == nil || !strings.Contains(err.Error(), "plain http") {
			t.Errorf("%+v: %v, want refused", cfg, err)
		}
	}
	if _, err := New(&kubeconfig.Config{Server: "http://192.0.2.1:6443"}, nil); err != nil {
		t.Errorf("plain http without a token: %v", err)
	}
}
