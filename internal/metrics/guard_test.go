package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// reviewer answers from a table of tokens and counts the questions.
type reviewer struct {
	verdicts map[string]Verdict
	err      error
	asked    int
}

func (r *reviewer) Review(_ context.Context, token string) (Verdict, error) {
	r.asked++
	if r.err != nil {
		return 0, r.err
	}
	return r.verdicts[token], nil // unknown: Unauthenticated
}

type guarded struct {
	g   *Guard
	r   *reviewer
	now time.Time
}

func newGuarded() *guarded {
	x := &guarded{r: &reviewer{verdicts: map[string]Verdict{"prometheus": Allowed, "tenant": Forbidden}},
		now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	x.g = NewGuard(x.r, func() time.Time { return x.now }, "test")
	return x
}

// scrape returns the status code of a scrape with the given Authorization
// header ("" for none).
func (x *guarded) scrape(auth string) int {
	h := x.g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestAScrapeNeedsATokenTheAPIServerAllows(t *testing.T) {
	x := newGuarded()
	for _, c := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Basic cHJvbWV0aGV1cw==", http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"Bearer made-up", http.StatusUnauthorized},
		{"Bearer tenant", http.StatusForbidden},
		{"Bearer prometheus", http.StatusOK},
	} {
		if got := x.scrape(c.auth); got != c.want {
			t.Errorf("Authorization %q: %d, want %d", c.auth, got, c.want)
		}
	}
	if x.r.asked != 3 {
		t.Errorf("%d reviews, want 3: a request without a bearer token asks nothing", x.r.asked)
	}
}

func TestAVerdictIsKeptForItsTTL(t *testing.T) {
	x := newGuarded()
	for range 10 {
		x.now = x.now.Add(5 * time.Second) // a scrape every 5 s for 50 s
		if got := x.scrape("Bearer prometheus"); got != http.StatusOK {
			t.Fatalf("scrape: %d", got)
		}
	}
	if x.r.asked != 1 {
		t.Errorf("%d reviews for 10 scrapes within a minute, want 1", x.r.asked)
	}
	x.now = x.now.Add(time.Minute)
	x.scrape("Bearer prometheus")
	if x.r.asked != 2 {
		t.Errorf("%d reviews after the verdict's minute, want 2", x.r.asked)
	}
	// A refusal is kept as well: a scraper retrying with a bad token does not
	// make the API server answer each time.
	for range 5 {
		x.scrape("Bearer tenant")
	}
	if x.r.asked != 3 {
		t.Errorf("%d reviews after 5 refused scrapes, want 3", x.r.asked)
	}
}

func TestAnAPIServerThatDoesNotAnswerIsAskedAgain(t *testing.T) {
	x := newGuarded()
	x.r.err = errors.New("connection refused")
	if got := x.scrape("Bearer prometheus"); got != http.StatusServiceUnavailable {
		t.Errorf("scrape with the API server down: %d, want 503", got)
	}
	x.r.err = nil
	if got := x.scrape("Bearer prometheus"); got != http.StatusOK {
		t.Errorf("scrape once it answers: %d, want 200 (no verdict was kept)", got)
	}
}

// A flood of made-up tokens costs the API server a bounded number of
// reviews, and the guard a bounded table; the real scraper's kept verdict
// still lets it in.
func TestAFloodOfTokensIsBounded(t *testing.T) {
	x := newGuarded()
	x.scrape("Bearer prometheus")
	var throttled int
	for i := range 10000 {
		if i%100 == 0 {
			x.now = x.now.Add(time.Second) // 100 tokens a second for 100 s
		}
		if x.scrape(fmt.Sprintf("Bearer flood-%d", i)) == http.StatusTooManyRequests {
			throttled++
		}
		if x.g.Kept() > x.g.Max {
			t.Fatalf("%d verdicts kept, cap %d", x.g.Kept(), x.g.Max)
		}
	}
	// 10 at once, then one a second for 100 s.
	if x.r.asked > 1+10+100 || throttled < 9800 {
		t.Errorf("%d reviews and %d throttled of 10000 made-up tokens", x.r.asked, throttled)
	}
	x.now = x.now.Add(2 * time.Second) // the bucket refills
	if got := x.scrape("Bearer prometheus"); got != http.StatusOK {
		t.Errorf("the real scraper after the flood: %d", got)
	}
}
