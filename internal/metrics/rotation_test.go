package metrics

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// Found by the red team on issue 42 ("one tenant" against the metrics port): the scraper's
// token is a projected one that the kubelet rotates (at 80% of its life,
// ~48 min for the default hour). A rotated token is unknown to the guard, so
// its first review needs a budget - its client's (the source's /64 or /24)
// and everyone's. The scraper's client is its Pod's /64 (or IPv4 /24): any
// tenant Pod scheduled on the same node (podAffinity to the Prometheus Pod
// is enough) shares that budget; tenant Pods on ten nodes share everyone's.
// Sending made-up tokens a little faster than the budgets refill keeps both
// empty, and the scraper's rotated token gets 429 for as long as the flood
// lasted: the metrics - and the RouterConflict / PrefixNotReported alerts
// built on them - went dark from the moment of rotation. The rotated token
// comes on the scraper's kept-alive connection, which a token allowed before
// vouched for: it is reviewed without the budget.
func TestARotatedTokenOnTheScrapersConnectionIsNotThrottled(t *testing.T) {
	for _, c := range []struct {
		name    string
		sources []string
		every   time.Duration
	}{
		{"one tenant Pod on the Prometheus node (same /64)", []string{"[fd00:10:244:1::77]:5555"}, 500 * time.Millisecond},
		{"tenant Pods on twelve nodes (everyone's budget)", func() []string {
			var s []string
			for i := range 12 {
				s = append(s, fmt.Sprintf("[fd00:10:244:%x::77]:5555", 0x10+i))
			}
			return s
		}(), 500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newGuarded()
			x.r.verdicts["prometheus-rotated"] = Allowed
			if got := x.scrape("Bearer prometheus"); got != http.StatusOK {
				t.Fatalf("first scrape %d", got)
			}
			failed, scrapes := 0, 0
			n := 0
			for elapsed := time.Duration(0); elapsed < 10*time.Minute; elapsed += c.every {
				x.step(c.every)
				for _, src := range c.sources {
					n++
					x.scrapeFrom(src, fmt.Sprintf("Bearer made-up-%d", n))
				}
				if elapsed%(30*time.Second) == 0 {
					scrapes++
					// At 5 minutes the kubelet rotates the projected token:
					// from then on the scraper sends the new one.
					token := "Bearer prometheus"
					if elapsed >= 5*time.Minute {
						token = "Bearer prometheus-rotated"
					}
					if got := x.scrape(token); got != http.StatusOK {
						failed++
					}
				}
			}
			t.Logf("%d of %d scrapes with the rotated token refused; %d reviews asked", failed, scrapes, x.r.asked)
			if failed > 1 {
				t.Errorf("%d of %d scrapes over 10 minutes failed after the scraper's token rotated during the flood", failed, scrapes)
			}
		})
	}
}
