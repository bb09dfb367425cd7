package metrics

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Verdict is what the API server said of a scraper's token.
type Verdict uint8

const (
	// Unauthenticated: the token is no identity the API server knows.
	Unauthenticated Verdict = iota
	// Forbidden: a known identity that may not get /metrics.
	Forbidden
	// Allowed: it may.
	Allowed
)

// Reviewer asks the API server who a bearer token is (a TokenReview) and
// whether that identity may get the non-resource URL /metrics (a
// SubjectAccessReview), as kube-rbac-proxy and controller-runtime's metrics
// filter do. Neither review is stored: they are questions, not writes.
type Reviewer interface {
	Review(ctx context.Context, token string) (Verdict, error)
}

// Guard admits a scrape of /metrics only with a bearer token the API server
// says may get /metrics. Verdicts are kept for TTL, for at most Max tokens (by
// their hash; the oldest verdict goes first), so a scraper every few seconds
// costs two reviews a TTL; a token not kept is reviewed at most PerSecond a
// second after a burst of Burst, so a flood of made-up tokens costs the API
// server a bounded rate of reviews (429 beyond).
type Guard struct {
	Reviewer  Reviewer
	Now       func() time.Time
	TTL       time.Duration
	Max       int
	Burst     float64
	PerSecond float64

	scrapes *CounterVec
	reviews *Counter
	mu      sync.Mutex
	kept    map[[sha256.Size]byte]verdict
	tokens  float64 // the review bucket
	last    time.Time
}

type verdict struct {
	v  Verdict
	at time.Time
}

// NewGuard returns a guard with renumber's bounds: verdicts kept a minute, for
// 64 tokens, reviews at 1/s after a burst of 10.
func NewGuard(r Reviewer, now func() time.Time, component string) *Guard {
	return &Guard{Reviewer: r, Now: now, TTL: time.Minute, Max: 64, Burst: 10, PerSecond: 1,
		scrapes: NewCounterVec("renumber_"+component+"_metrics_scrapes_total",
			"Scrapes of /metrics by how the guard answered them: allowed, unauthenticated (401), forbidden (403), throttled (429: too many tokens to review), error (503: the API server did not answer).", "outcome"),
		reviews: NewCounter("renumber_"+component+"_metrics_reviews_total",
			"Scrapers' tokens reviewed with the API server (a TokenReview, and a SubjectAccessReview when it names an identity); a verdict is kept a minute.")}
}

// Collect implements Collector.
func (g *Guard) Collect(w *Writer) {
	g.scrapes.Collect(w)
	g.reviews.Collect(w)
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
		v, outcome := g.verdict(r.Context(), token)
		switch {
		case outcome != "":
		case v == Allowed:
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
// "throttled" or "error" when there is none.
func (g *Guard) verdict(ctx context.Context, token string) (Verdict, string) {
	key := sha256.Sum256([]byte(token))
	now := g.Now()
	g.mu.Lock()
	if k, ok := g.kept[key]; ok && now.Sub(k.at) < g.TTL {
		g.mu.Unlock()
		return k.v, ""
	}
	if !g.take(now) {
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
	g.keep(key, verdict{v: v, at: now})
	return v, ""
}

// take spends one review from the bucket.
func (g *Guard) take(now time.Time) bool {
	if g.last.IsZero() {
		g.tokens = g.Burst
	} else if d := now.Sub(g.last); d > 0 {
		g.tokens = min(g.Burst, g.tokens+d.Seconds()*g.PerSecond)
	}
	g.last = now
	if g.tokens < 1 {
		return false
	}
	g.tokens--
	return true
}

// keep records v under key, making room first: expired verdicts go, then the
// oldest.
func (g *Guard) keep(key [sha256.Size]byte, v verdict) {
	if g.kept == nil {
		g.kept = map[[sha256.Size]byte]verdict{}
	}
	if _, ok := g.kept[key]; !ok && len(g.kept) >= g.Max {
		var oldest [sha256.Size]byte
		first := true
		for k, e := range g.kept {
			if v.at.Sub(e.at) >= g.TTL {
				delete(g.kept, k)
				continue
			}
			if first || e.at.Before(g.kept[oldest].at) {
				oldest, first = k, false
			}
		}
		if len(g.kept) >= g.Max {
			delete(g.kept, oldest)
		}
	}
	g.kept[key] = v
}

// Kept is how many verdicts the guard holds.
func (g *Guard) Kept() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.kept)
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
