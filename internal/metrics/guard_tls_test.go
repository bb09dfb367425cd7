package metrics

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"testing"
)

// Issue 42, the LAN: the guard's review budget is the
// connection's client's only where ConnContext is handed the capped
// listener's *conn (withConnOf). The agent guards its port only with TLS
// (agent/main.go: guard on, ep.TLS set), and http.Server.ServeTLS wraps
// the capped listener in tls.NewListener: ConnContext is handed a
// *tls.Conn, the client is lost, and the budget falls back to the remote's
// /64 (Client). One LAN host from 100 on-link /64s again has 100 budgets
// of reviews - TestOneLANHostFromManyPrefixesSpendsOneBudget, as served.
func TestOneLANHostFromManyPrefixesSpendsOneBudgetOverTLS(t *testing.T) {
	x := newGuarded()
	conns := &Conns{Max: 1 << 20, PerClient: 1 << 20, Routes: lanRoutes}
	reviewed := 0
	for n := range 100 {
		remote := fmt.Sprintf("[2001:db8:f00:%x::1]:4000", n)
		before := x.r.asked
		x.scrapeOn(conns.connTLS(t, remote), remote, fmt.Sprintf("Bearer made-up-%d", n))
		reviewed += x.r.asked - before
	}
	if reviewed != x.g.ClientBurst {
		t.Errorf("100 /64s on the LAN had %d tokens reviewed at once over TLS, want one client's burst, %d", reviewed, x.g.ClientBurst)
	}
	x.r.verdicts["new-scraper-token"] = Allowed
	if got := x.scrapeOn(conns.connTLS(t, scraper), scraper, "Bearer new-scraper-token"); got != http.StatusOK {
		t.Errorf("the scraper's first scrape with a rotated token, on a new TLS connection: %d, want 200", got)
	}
}

// connTLS is a new connection's context from remote as http.Server.ServeTLS
// makes it: the capped listener wrapped in tls.NewListener.
func (c *Conns) connTLS(t *testing.T, remote string) context.Context {
	t.Helper()
	l := &fakeListener{next: make(chan net.Conn, 1)}
	l.next <- &fakeConn{remote: remote}
	nc, err := tls.NewListener(c.Listen(l), &tls.Config{}).Accept()
	if err != nil {
		t.Fatal(err)
	}
	return withConnOf(context.Background(), nc)
}
