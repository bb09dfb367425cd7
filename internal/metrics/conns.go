package metrics

import (
	"net"
	"net/netip"
	"sync"
)

// Conns caps the connections a listener holds open: at most PerClient from
// one client (ClientOf: a link, a /24 or a /64) and Max in all.
//
// A new connection beyond a cap is not refused and does not wait (a
// netutil.LimitListener would make the real scraper wait behind whoever
// holds the connections, for as long as they hold them): it is accepted, and
// the oldest connection of the client holding the most is closed. So a client
// holding no more than anyone else is the last to lose a connection, and
// whoever opens connections to fill the cap closes its own: the scraper's
// one connection a scrape is closed only once every client holds one.
type Conns struct {
	Max, PerClient int
	// Routes, when set, says how the node answers a source (KernelRoutes):
	// the sources anyone on one link can take are one client (ClientOf).
	// Unset (the writer, in its Pod's network), clients are prefixes.
	Routes func(netip.Addr) (Route, bool)

	mu      sync.Mutex
	seq     uint64
	open    map[*conn]struct{}
	clients map[string][]*conn // oldest first
	closed  *Counter
	gauge   *GaugeFunc
}

// NewConns returns renumber's caps: 64 connections, 8 from one client (a
// scrape needs one; an idle TLS connection costs some 40 kB).
func NewConns(component string) *Conns {
	c := &Conns{Max: 64, PerClient: 8,
		closed: NewCounter("renumber_"+component+"_metrics_connections_evicted_total",
			"Connections to the metrics port closed to make room for a new one (over 64 in all, or 8 from one client).")}
	c.gauge = NewGaugeFunc("renumber_"+component+"_metrics_connections", "Connections open to the metrics port.",
		func() float64 { return float64(c.Open()) })
	return c
}

// Collect implements Collector.
func (c *Conns) Collect(w *Writer) {
	c.closed.Collect(w)
	c.gauge.Collect(w)
}

// Open is how many connections are open.
func (c *Conns) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

// Listen caps l's connections.
func (c *Conns) Listen(l net.Listener) net.Listener { return &capped{Listener: l, c: c} }

type capped struct {
	net.Listener
	c *Conns
}

func (l *capped) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	x := &conn{Conn: nc, client: l.c.client(nc.RemoteAddr().String())}
	if victim := l.c.add(x); victim != nil {
		_ = victim.Close()
	}
	return x, nil
}

// add records x and returns the connection to close to make room, if any.
func (c *Conns) add(x *conn) *conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == nil {
		c.open, c.clients = map[*conn]struct{}{}, map[string][]*conn{}
	}
	var victim *conn
	if held := c.clients[x.client]; len(held) >= c.PerClient {
		victim = held[0]
	} else if len(c.open) >= c.Max {
		for _, held := range c.clients {
			if victim == nil || len(held) > len(c.clients[victim.client]) ||
				len(held) == len(c.clients[victim.client]) && held[0].seq < victim.seq {
				victim = held[0]
			}
		}
	}
	if victim != nil {
		c.forget(victim)
		if c.closed != nil {
			c.closed.Inc()
		}
	}
	c.seq++
	x.seq, x.owner = c.seq, c
	c.open[x] = struct{}{}
	c.clients[x.client] = append(c.clients[x.client], x)
	return victim
}

// forget drops x from the books (under mu).
func (c *Conns) forget(x *conn) {
	if _, ok := c.open[x]; !ok {
		return
	}
	delete(c.open, x)
	held := c.clients[x.client]
	for i, h := range held {
		if h == x {
			held = append(held[:i:i], held[i+1:]...)
			break
		}
	}
	if len(held) == 0 {
		delete(c.clients, x.client)
	} else {
		c.clients[x.client] = held
	}
}

type conn struct {
	net.Conn
	client string
	seq    uint64
	owner  *Conns
	once   sync.Once
}

func (x *conn) Close() error {
	x.once.Do(func() {
		x.owner.mu.Lock()
		x.owner.forget(x)
		x.owner.mu.Unlock()
	})
	return x.Conn.Close()
}

// client is remote's client, as Routes has the node answer it.
func (c *Conns) client(remote string) string {
	if c.Routes == nil {
		return Client(remote)
	}
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return remote
	}
	r, ok := c.Routes(ap.Addr().Unmap().WithZone(""))
	return ClientOf(remote, r, ok)
}

// Route is how the node answers a source: the link the answer leaves by,
// and whether whoever is on that link can have chosen it.
type Route struct {
	Link string
	// Direct: the source is on the link (no gateway). Learned: through a
	// gateway the link itself named - a default route (from an RA, or from
	// DHCP on IPv4), a route an RA or a redirect set.
	Direct, Learned bool
}

// ClientOf names who remote is for the per-client limits, given how the
// node answers it (routed: a route was found). A host on a link can take
// any address the node answers on that link: any free address of the
// link's subnets, and - one RA saying so, router lifetime 0 - any /64 it
// likes marked on-link, or, advertising itself a default router (or
// redirecting), any address the node reaches through one. So every source
// answered directly on a link, or through a gateway the link named, is one
// client: the link. What it cannot take is an address the node answers
// elsewhere - a Pod's, through the CNI's own link or a route it set to
// another node - and those are each their prefix's client (Client): a
// scraper there keeps its connection and its review budget whatever the LAN
// does. Found by a red team (issue 42): one host, 9 on-link /64s, all 64
// connections.
func ClientOf(remote string, r Route, routed bool) string {
	if routed && r.Link != "" && (r.Direct || r.Learned) {
		return "link " + r.Link
	}
	return Client(remote)
}

// Client names who a remote address is for the per-client limits when no
// route says more: its /24 (IPv4) or /64 (IPv6), the common subnets (the
// writer, in its Pod's network, sees the LAN only through its node).
func Client(remote string) string {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return remote
	}
	a := ap.Addr().Unmap().WithZone("")
	bits := 64
	if a.Is4() {
		bits = 24
	}
	p, _ := a.Prefix(bits)
	return p.String()
}
