package metrics

import (
	"net"
	"net/netip"
	"sync"
)

// Conns caps the connections a listener holds open: at most PerClient from
// one client (Client: a /24 or a /64) and Max in all.
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
	x := &conn{Conn: nc, client: Client(nc.RemoteAddr().String())}
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

// Client names who a remote address is for the per-client limits: its /24
// (IPv4) or /64 (IPv6). A host on the LAN can take any free address in its
// subnet (answering ARP or Neighbor Solicitations for it), and the common
// subnets are these; it cannot complete a TCP handshake from outside them,
// where no route brings the answer back.
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
