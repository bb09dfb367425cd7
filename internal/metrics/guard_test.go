package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
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
	clk *clocktesting.FakePassiveClock
	// scraperConn is the scraper's kept-alive connection (WithConn).
	scraperConn context.Context
}

func newGuarded() *guarded {
	x := &guarded{r: &reviewer{verdicts: map[string]Verdict{"prometheus": Allowed, "tenant": Forbidden}},
		clk: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))}
	x.g = NewGuard(x.r, x.clk, "test")
	x.scraperConn = WithConn(context.Background())
	return x
}

func (x *guarded) step(d time.Duration) { x.clk.SetTime(x.clk.Now().Add(d)) }

// scraper is the real scraper's address (a Pod's).
const scraper = "[fd00:10:244:1::5]:41000"

// scrape returns the status code of a scrape from the scraper's address with
// the given Authorization header ("" for none).
func (x *guarded) scrape(auth string) int { return x.scrapeOn(x.scraperConn, scraper, auth) }

// scrapeFrom is a scrape from remote, on a connection of its own.
func (x *guarded) scrapeFrom(remote, auth string) int {
	return x.scrapeOn(WithConn(context.Background()), remote, auth)
}

// scrapeOn is a scrape from remote on the connection conn.
func (x *guarded) scrapeOn(conn context.Context, remote, auth string) int {
	h := x.g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	req := httptest.NewRequestWithContext(conn, http.MethodGet, "/metrics", nil)
	req.RemoteAddr = remote
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
		x.step(5 * time.Second) // a scrape every 5 s for 50 s
		if got := x.scrape("Bearer prometheus"); got != http.StatusOK {
			t.Fatalf("scrape: %d", got)
		}
	}
	if x.r.asked != 1 {
		t.Errorf("%d reviews for 10 scrapes within a minute, want 1", x.r.asked)
	}
	x.step(time.Minute)
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

// A flood of made-up tokens from one host costs the API server a bounded
// number of reviews, and the guard bounded tables.
func TestAFloodOfTokensIsBounded(t *testing.T) {
	x := newGuarded()
	var throttled int
	for i := range 10000 {
		if i%100 == 0 {
			x.step(time.Second) // 100 tokens a second for 100 s
		}
		if x.scrapeFrom(fmt.Sprintf("[2001:db8:1:2::%x]:4000", i), fmt.Sprintf("Bearer flood-%d", i)) == http.StatusTooManyRequests {
			throttled++
		}
		if allowed, refused := x.g.Kept(); allowed > x.g.Max || refused > x.g.MaxRefused {
			t.Fatalf("%d allowed and %d refused verdicts kept, caps %d and %d", allowed, refused, x.g.Max, x.g.MaxRefused)
		}
	}
	// One /64 is one client: 5 at once, then one a second for 100 s.
	if x.r.asked > 5+100 || throttled < 9895 {
		t.Errorf("%d reviews and %d throttled of 10000 made-up tokens from one /64", x.r.asked, throttled)
	}
}

// The measurement: 20 made-up tokens a second made the real
// scraper fail 18 of 20 scrapes. Its verdict is now one made-up tokens
// cannot push out, and its review when that verdict ends is not theirs to
// spend.
func TestMadeUpTokensDoNotFailTheScraper(t *testing.T) {
	for _, c := range []struct {
		name  string
		hosts []string // the LAN's subnets: one host takes any address in them
	}{
		{"one address", []string{"192.168.1.66:%d"}},
		{"every address of the LAN's /24", []string{"192.168.1.%d:5000"}},
		{"every address of the LAN's /24 and /64", []string{"192.168.1.%d:5000", "[2001:db8:1:2::%x]:5000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newGuarded()
			var failed, scrapes int
			for s := range 600 { // 10 minutes, a scrape every 30 s
				for i := range 20 { // ahead of the scraper: they are many
					n := s*20 + i
					x.scrapeFrom(fmt.Sprintf(c.hosts[n%len(c.hosts)], 1+n%254), fmt.Sprintf("Bearer made-up-%d", n))
				}
				if s%30 == 0 {
					scrapes++
					if got := x.scrape("Bearer prometheus"); got != http.StatusOK {
						failed++
					}
				}
				x.step(time.Second)
			}
			if failed > 0 {
				t.Errorf("the real scraper failed %d of %d scrapes", failed, scrapes)
			}
			// Its client's budget: 5 at once and one a second for each subnet.
			if max := len(c.hosts) * (5 + 600); x.r.asked > max+20 {
				t.Errorf("%d reviews in 600 s, want at most %d for the flood and 20 for the scraper", x.r.asked, max)
			}
		})
	}
}

// A new scraper, or the real one with a new token (projected tokens
// rotate), is reviewed out of its own budget: one host's flood spends
// only its own.
func TestOneHostsFloodLeavesOthersTheirBudget(t *testing.T) {
	x := newGuarded()
	for i := range 1000 {
		x.scrapeFrom("[2001:db8:1:2::66]:4000", fmt.Sprintf("Bearer flood-%d", i))
	}
	if got := x.scrape("Bearer prometheus"); got != http.StatusOK {
		t.Errorf("a scraper's first scrape during another host's flood: %d, want 200", got)
	}
}

// A token the API server stops allowing (its ServiceAccount deleted) is no
// longer known-good once its verdict ends: its next reviews are budgeted.
func TestARevokedTokenIsNoLongerKnownGood(t *testing.T) {
	x := newGuarded()
	x.scrape("Bearer prometheus")
	x.r.verdicts["prometheus"] = Unauthenticated
	x.step(time.Minute)
	if got := x.scrape("Bearer prometheus"); got != http.StatusUnauthorized {
		t.Fatalf("revoked token: %d, want 401", got)
	}
	if allowed, refused := x.g.Kept(); allowed != 0 || refused != 1 {
		t.Errorf("%d allowed and %d refused verdicts kept, want 0 and 1", allowed, refused)
	}
}
