package metrics

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Verdict is what the API server said of a scraper's token.
type Verdict uint8

const (
	// Unauthenticated: the token is no identity the API server knows (for
	// the audience the guard names).
	Unauthenticated Verdict = iota
	// Forbidden: a known identity that may not get /metrics.
	Forbidden
	// Allowed: it may.
	Allowed
)

// Audience is the audience a scraper's token must be minted for, by
// default: a projected ServiceAccount token with this audience is good for
// renumber's metrics and nothing else (the API server refuses it).
const Audience = "renumber-metrics"

// ForAudience reports whether a TokenReview's status audiences say the token
// is for one of want: the API server answers the audiences both the request
// and the token name; an authenticator that ignores audiences answers none,
// which is no.
func ForAudience(want, got []string) bool {
	if len(want) == 0 {
		return true
	}
	for _, a := range got {
		if slices.Contains(want, a) {
			return true
		}
	}
	return false
}

// Reviewer asks the API server who a bearer token is (a TokenReview) and
// whether that identity may get the non-resource URL /metrics (a
// SubjectAccessReview), as kube-rbac-proxy and controller-runtime's metrics
// filter do. Neither review is stored: they are questions, not writes.
type Reviewer interface {
	Review(ctx context.Context, token string) (Verdict, error)
}

// Guard admits a scrape of /metrics only with a bearer token the API server
// says may get /metrics.
//
// Verdicts are kept by the token's hash in two tables: the allowed and the
// refused. A made-up token can only ever land in the refused one, so a flood
// of them never pushes out the real scraper's verdict. An allowed verdict
// answers for TTL; after that the token is known-good and its next review
// skips the rate limits below (the allowed table holds at most Max tokens,
// each reviewed at most once a TTL while the API server answers, so this
// costs the API server a bounded rate too).
//
// Any other token is reviewed only within two budgets: its client's (Client:
// the source's /24 or /64, a host on the LAN can take any address in its
// subnet) and everyone's. Beyond them the scrape gets 429 without a review,
// so made-up tokens from one subnet cost the API server PerClient reviews a
// second and leave the other clients' budgets alone while fewer than
// TotalBurst/ClientBurst subnets flood at once.
type Guard struct {
	Reviewer Reviewer
	Clock    clock.PassiveClock
	TTL      time.Duration
	// Max allowed and MaxRefused refused verdicts are kept; the oldest goes
	// first, each table making room only from itself.
	Max, MaxRefused int
	// PerClient reviews a second after a burst of ClientBurst, for at most
	// MaxClients clients at once; Total and TotalBurst bound them all.
	PerClient, Total        rate.Limit
	ClientBurst, TotalBurst int
	MaxClients              int

	scrapes *CounterVec
	reviews *Counter
	mu      sync.Mutex
	allowed table
	refused table
	clients map[string]*rate.Limiter
	total   *rate.Limiter
}

// NewGuard returns a guard with renumber's bounds: verdicts answer for a
// minute, 64 allowed and 1024 refused ones are kept; an unknown token is
// reviewed within 1 a second after a burst of 5 for its client, and 10 a
// second after a burst of 20 for all.
func NewGuard(r Reviewer, clk clock.PassiveClock, component string) *Guard {
	return &Guard{Reviewer: r, Clock: clk, TTL: time.Minute, Max: 64, MaxRefused: 1024,
		PerClient: 1, ClientBurst: 5, Total: 10, TotalBurst: 20, MaxClients: 1024,
		scrapes: NewCounterVec("renumber_"+component+"_metrics_scrapes_total",
			"Scrapes of /metrics by how the guard answered them: allowed, unauthenticated (401), forbidden (403), throttled (429: too many unknown tokens from the client, or from all), error (503: the API server did not answer).", "outcome"),
		reviews: NewCounter("renumber_"+component+"_metrics_reviews_total",
			"Scrapers' tokens reviewed with the API server (a TokenReview, and a SubjectAccessReview when it names an identity); a verdict answers for a minute.")}
}

// Collect implements Collector.
func (g *Guard) Collect(w *Writer) {
	g.scrapes.Collect(w)
	g.reviews.Collect(w)
}

// connMemory is what the guard remembers of one connection: whether a token on it
// was allowed. A scraper keeps its connection across scrapes; when its
// projected token rotates, the new one comes on a connection that already
// proved itself, and is reviewed without waiting for a budget that made-up
// tokens from its subnet (a tenant Pod beside it) may keep empty.
type connMemory struct {
	vouched atomic.Bool
	// client is the connection's client as Conns counted it ("": by its
	// address, Client).
	client string
}

type connKey struct{}

// WithConn returns ctx carrying a new connection's memory (http.Server's
// ConnContext).
func WithConn(ctx context.Context) context.Context { return withConnOf(ctx, nil) }

// withConnOf is WithConn for nc, knowing its client when Conns counted it.
// ServeTLS (the agent guards its port only over TLS) hands ConnContext a
// *tls.Conn around the capped listener's: unwrapped, or every connection
// would fall back to its remote's /64 budget (issue 42).
func withConnOf(ctx context.Context, nc net.Conn) context.Context {
	m := &connMemory{}
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	if x, ok := nc.(*conn); ok {
		m.client = x.client
	}
	return context.WithValue(ctx, connKey{}, m)
}

// Wrap guards next.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		token = strings.TrimSpace(token)
		if !ok || token == "" {
			g.refuse(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		c, _ := r.Context().Value(connKey{}).(*connMemory)
		client := Client(r.RemoteAddr)
		if c != nil && c.client != "" {
			client = c.client // one budget for a link, as one cap
		}
		v, outcome := g.verdict(r.Context(), client, token, c != nil && c.vouched.Load())
		switch {
		case outcome != "":
		case v == Allowed:
			if c != nil {
				c.vouched.Store(true)
			}
			g.count("allowed")
			next.ServeHTTP(w, r)
			return
		case v == Forbidden:
			outcome = "forbidden"
		default:
			outcome = "unauthenticated"
		}
		g.refuse(w, outcome, map[string]int{"unauthenticated": http.StatusUnauthorized, "forbidden": http.StatusForbidden,
			"throttled": http.StatusTooManyRequests, "error": http.StatusServiceUnavailable}[outcome])
	})
}

// verdict is the kept verdict on token, or a new review's; outcome is
// "throttled" or "error" when there is none. A token known good, or sent on
// a vouched connection, is reviewed without a budget.
func (g *Guard) verdict(ctx context.Context, client, token string, vouched bool) (Verdict, string) {
	key := sha256.Sum256([]byte(token))
	now := g.Clock.Now()
	g.mu.Lock()
	if at, ok := g.allowed[key]; ok && now.Sub(at.at) < g.TTL {
		g.mu.Unlock()
		return Allowed, ""
	}
	if at, ok := g.refused[key]; ok && now.Sub(at.at) < g.TTL {
		g.mu.Unlock()
		return at.v, ""
	}
	_, known := g.allowed[key]
	if !known && !vouched && !g.take(client, now) {
		g.mu.Unlock()
		return 0, "throttled"
	}
	g.mu.Unlock()

	if g.reviews != nil {
		g.reviews.Inc()
	}
	v, err := g.Reviewer.Review(ctx, token)
	if err != nil {
		return 0, "error" // not kept: the next scrape asks again
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if v == Allowed {
		delete(g.refused, key)
		g.allowed = g.allowed.keep(key, verdict{v: v, at: now}, g.Max)
	} else {
		delete(g.allowed, key) // revoked: no longer known-good
		g.refused = g.refused.keep(key, verdict{v: v, at: now}, g.MaxRefused)
	}
	return v, ""
}

// take spends one review from client's budget and everyone's.
func (g *Guard) take(client string, now time.Time) bool {
	if g.total == nil {
		g.total = rate.NewLimiter(g.Total, g.TotalBurst)
		g.clients = map[string]*rate.Limiter{}
	}
	l, ok := g.clients[client]
	if !ok {
		if len(g.clients) >= g.MaxClients {
			// A full budget is what a new client gets anyway: forget those.
			for c, l := range g.clients {
				if l.TokensAt(now) >= float64(g.ClientBurst) {
					delete(g.clients, c)
				}
			}
		}
		if len(g.clients) >= g.MaxClients {
			return false
		}
		l = rate.NewLimiter(g.PerClient, g.ClientBurst)
		g.clients[client] = l
	}
	// Both or neither: a client refused by everyone's budget keeps its own.
	if l.TokensAt(now) < 1 || g.total.TokensAt(now) < 1 {
		return false
	}
	return l.AllowN(now, 1) && g.total.AllowN(now, 1)
}

// Kept is how many verdicts the guard holds: allowed, refused.
func (g *Guard) Kept() (int, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.allowed), len(g.refused)
}

func (g *Guard) count(outcome string) {
	if g.scrapes != nil {
		g.scrapes.With(outcome).Inc()
	}
}

func (g *Guard) refuse(w http.ResponseWriter, outcome string, code int) {
	g.count(outcome)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="renumber metrics"`)
	}
	http.Error(w, outcome, code)
}

type verdict struct {
	v  Verdict
	at time.Time
}

// table is verdicts by the token's hash.
type table map[[sha256.Size]byte]verdict

// keep records v under key, making room first by dropping the oldest.
func (t table) keep(key [sha256.Size]byte, v verdict, max int) table {
	if t == nil {
		t = table{}
	}
	if _, ok := t[key]; !ok && len(t) >= max {
		var oldest [sha256.Size]byte
		first := true
		for k, e := range t {
			if first || e.at.Before(t[oldest].at) {
				oldest, first = k, false
			}
		}
		delete(t, oldest)
	}
	t[key] = v
	return t
}
