package metrics

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// FuzzGuardAgainstTheLAN plays a host on the LAN against the guard: at any
// time it scrapes with any token it makes up (or a refused tenant's, or
// none) from any address in the LAN's /24 and /64, or from any /64 it
// marked on-link (one RA does it), on connections the agent's caps count
// (Conns with the node's routes), while the real scraper scrapes every 30 s
// from a Pod's address and its token rotates every 10 minutes (a projected
// token). After every step: each of the scraper's scrapes was allowed, the
// made-up tokens cost the API server no more than one client's budget (the
// link's), and the verdict tables stay within their caps.
func FuzzGuardAgainstTheLAN(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 200, 1, 1, 1, 1, 1, 1})
	f.Add([]byte("a flood of made-up tokens from every address on the link, and a slow one"))
	f.Fuzz(func(t *testing.T, steps []byte) {
		x := newGuarded()
		lan := &Conns{Max: 64, PerClient: 8, Routes: lanRoutes}
		fromLAN := func(remote, auth string) int { return x.scrapeOn(lan.conn(t, remote), remote, auth) }
		start := x.clk.Now()
		token := func() string { return fmt.Sprintf("scraper-%d", int(x.clk.Now().Sub(start)/(10*time.Minute))) }
		nextScrape, lanReviews := start, 0
		for i, b := range steps {
			switch b % 4 {
			case 0: // time passes: up to 31.75 s
				x.step(time.Duration(b/4) * 500 * time.Millisecond)
			case 1, 2: // a made-up token from some LAN address
				remote := fmt.Sprintf("192.168.1.%d:4000", b)
				switch {
				case b%4 == 2 && b%8 < 4:
					remote = fmt.Sprintf("[2001:db8:1:2::%x:%x]:4000", i, b)
				case b%4 == 2: // a /64 of its own, marked on-link
					remote = fmt.Sprintf("[2001:db8:%x:%x::1]:4000", i, b)
				}
				before := x.r.asked
				auth := []string{"Bearer made-up-%d", "Bearer tenant", "", "Basic %d"}[int(b/4)%4]
				if auth != "" && auth != "Bearer tenant" {
					auth = fmt.Sprintf(auth, i)
				}
				fromLAN(remote, auth)
				lanReviews += x.r.asked - before
			case 3: // a burst: as many as the byte says, from one address
				for j := range int(b / 4) {
					before := x.r.asked
					fromLAN("192.168.1.7:4000", fmt.Sprintf("Bearer burst-%d-%d", i, j))
					lanReviews += x.r.asked - before
				}
			}
			for !x.clk.Now().Before(nextScrape) {
				x.r.verdicts[token()] = Allowed
				if got := x.scrape("Bearer " + token()); got != http.StatusOK {
					t.Fatalf("step %d: the scraper's scrape at %s: %d", i, x.clk.Now().Sub(start), got)
				}
				nextScrape = nextScrape.Add(30 * time.Second)
			}
			// One client, the link: 5 at once and one a second.
			if limit := 5 + int(x.clk.Now().Sub(start)/time.Second) + 1; lanReviews > limit {
				t.Fatalf("step %d: %d reviews of the LAN's tokens in %s, budget %d", i, lanReviews, x.clk.Now().Sub(start), limit)
			}
			if allowed, refused := x.g.Kept(); allowed > x.g.Max || refused > x.g.MaxRefused {
				t.Fatalf("step %d: %d allowed and %d refused verdicts kept", i, allowed, refused)
			}
		}
	})
}
