// Wire asks a server one question over UDP (over TCP when the answer does
// not fit), as a stub resolver does: a random ID, the question echoed back,
// datagrams that match neither dropped.

package resolve

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// MaxRecords bounds the AAAA records read from one answer: an answer with
// more is a problem, not a vote.
const MaxRecords = 16

// MaxTTL caps a TTL read, in seconds (RFC 8767's seven days): a replaced
// prefix drains at least its answers' TTL, and one server must not keep it
// for years.
const MaxTTL = 7 * 24 * 3600

// MaxChain bounds the CNAMEs followed from the name asked (the names
// reached, besides it): a chain longer is a problem, not a vote. Resolvers
// stop at about as many (Unbound restarts a query at most 11 times).
const MaxChain = 8

// Answer is what a server answered for a name's AAAA records.
type Answer struct {
	RCode dnsmessage.RCode
	// Addrs are the AAAA records of the name (through the CNAMEs the answer
	// holds), at most MaxRecords; TooMany says there were more.
	Addrs   []netip.Addr
	TooMany bool
	// LongChain: the CNAMEs from the name lead on past MaxChain of them;
	// the records of the names beyond are not read.
	LongChain bool
	// TTL is the lowest TTL of the records read (of the SOA record for an
	// answer without addresses; 0 when there is none).
	TTL time.Duration
}

// Exchanger asks server for name's AAAA records.
type Exchanger interface {
	Exchange(ctx context.Context, server netip.AddrPort, name string) (Answer, error)
}

// Wire is the Exchanger over the network.
type Wire struct {
	// Timeout bounds one exchange (ctx may end it sooner).
	Timeout time.Duration
}

// udpSize is the EDNS(0) payload size offered (DNS Flag Day 2020's).
const udpSize = 1232

// Exchange implements Exchanger.
func (w Wire) Exchange(ctx context.Context, server netip.AddrPort, name string) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	q, err := dnsmessage.NewName(name)
	if err != nil {
		return Answer{}, err
	}
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Answer{}, err
	}
	id := binary.BigEndian.Uint16(b[:])
	query, err := build(id, q)
	if err != nil {
		return Answer{}, err
	}
	msg, err := exchangeUDP(ctx, server, query, id, q)
	if err == nil && msg.Header.Truncated {
		msg, err = exchangeTCP(ctx, server, query, id, q)
	}
	if err != nil {
		return Answer{}, err
	}
	return read(msg, q), nil
}

// build packs the question: recursion desired, EDNS(0) with udpSize.
func build(id uint16, q dnsmessage.Name) ([]byte, error) {
	var opt dnsmessage.ResourceHeader
	if err := opt.SetEDNS0(udpSize, dnsmessage.RCodeSuccess, false); err != nil {
		return nil, err
	}
	bd := dnsmessage.NewBuilder(make([]byte, 0, 64), dnsmessage.Header{ID: id, RecursionDesired: true})
	bd.EnableCompression()
	if err := bd.StartQuestions(); err != nil {
		return nil, err
	}
	if err := bd.Question(dnsmessage.Question{Name: q, Type: dnsmessage.TypeAAAA, Class: dnsmessage.ClassINET}); err != nil {
		return nil, err
	}
	if err := bd.StartAdditionals(); err != nil {
		return nil, err
	}
	if err := bd.OPTResource(opt, dnsmessage.OPTResource{}); err != nil {
		return nil, err
	}
	return bd.Finish()
}

// ours reports whether a message is the response to our question.
func ours(m *dnsmessage.Message, id uint16, q dnsmessage.Name) bool {
	return m.Header.Response && m.Header.ID == id && len(m.Questions) == 1 &&
		strings.EqualFold(m.Questions[0].Name.String(), q.String()) &&
		m.Questions[0].Type == dnsmessage.TypeAAAA && m.Questions[0].Class == dnsmessage.ClassINET
}

// dial connects to server over network; the connection ends its reads and
// writes when ctx does. release ends both.
func dial(ctx context.Context, network string, server netip.AddrPort) (c net.Conn, release func(), err error) {
	var d net.Dialer
	if c, err = d.DialContext(ctx, network, server.String()); err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return c, func() { stop(); c.Close() }, nil
}

func exchangeUDP(ctx context.Context, server netip.AddrPort, query []byte, id uint16, q dnsmessage.Name) (*dnsmessage.Message, error) {
	c, release, err := dial(ctx, "udp", server)
	if err != nil {
		return nil, err
	}
	defer release()
	if _, err := c.Write(query); err != nil {
		return nil, err
	}
	buf := make([]byte, udpSize+512)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, cmpErr(ctx, err)
		}
		var m dnsmessage.Message
		if m.Unpack(buf[:n]) == nil && ours(&m, id, q) {
			return &m, nil
		}
		// Not the answer to our question (a late or forged datagram): wait on.
	}
}

func exchangeTCP(ctx context.Context, server netip.AddrPort, query []byte, id uint16, q dnsmessage.Name) (*dnsmessage.Message, error) {
	c, release, err := dial(ctx, "tcp", server)
	if err != nil {
		return nil, err
	}
	defer release()
	framed := binary.BigEndian.AppendUint16(nil, uint16(len(query)))
	if _, err := c.Write(append(framed, query...)); err != nil {
		return nil, cmpErr(ctx, err)
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, cmpErr(ctx, err)
	}
	buf := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, cmpErr(ctx, err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(buf); err != nil {
		return nil, fmt.Errorf("resolve: a garbled answer over TCP: %w", err)
	}
	if !ours(&m, id, q) {
		return nil, errors.New("resolve: the answer over TCP is not to our question")
	}
	return &m, nil
}

// cmpErr is ctx's error when ctx ended the exchange.
func cmpErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// read takes the AAAA records of q from m, through the CNAMEs m holds.
func read(m *dnsmessage.Message, q dnsmessage.Name) Answer {
	a := Answer{RCode: m.Header.RCode}
	ttl := int64(-1) // none read yet
	lowest := func(t uint32) {
		if t > 1<<31-1 {
			t = 0 // RFC 2181 8: a TTL with the top bit set is 0
		}
		t = min(t, MaxTTL)
		if ttl < 0 || int64(t) < ttl {
			ttl = int64(t)
		}
	}
	names, long := chase(m.Answers, q, lowest)
	a.LongChain = long
	for _, rr := range m.Answers {
		aaaa, ok := rr.Body.(*dnsmessage.AAAAResource)
		if !ok || !names[strings.ToLower(rr.Header.Name.String())] {
			continue
		}
		if len(a.Addrs) == MaxRecords {
			a.TooMany = true
			break
		}
		a.Addrs = append(a.Addrs, netip.AddrFrom16(aaaa.AAAA))
		lowest(rr.Header.TTL)
	}
	if len(a.Addrs) == 0 {
		ttl = -1
		for _, rr := range m.Authorities {
			if soa, ok := rr.Body.(*dnsmessage.SOAResource); ok {
				lowest(min(rr.Header.TTL, soa.MinTTL))
			}
		}
	}
	a.TTL = time.Duration(max(ttl, 0)) * time.Second
	return a
}

// chase returns the names q leads to through the CNAMEs in answers (q
// included, at most MaxChain more), telling ttl of the TTL of each CNAME
// followed, and whether the chain leads on past MaxChain. Answers need not
// be in chain order, so they are indexed by owner first: each record is read
// once, however the server orders or loops them.
func chase(answers []dnsmessage.Resource, q dnsmessage.Name, ttl func(uint32)) (names map[string]bool, long bool) {
	type link struct {
		to  string
		ttl uint32
	}
	from := map[string][]link{}
	for _, rr := range answers {
		if c, ok := rr.Body.(*dnsmessage.CNAMEResource); ok {
			owner := strings.ToLower(rr.Header.Name.String())
			from[owner] = append(from[owner], link{strings.ToLower(c.CNAME.String()), rr.Header.TTL})
		}
	}
	start := strings.ToLower(q.String())
	names = map[string]bool{start: true}
	for queue := []string{start}; len(queue) > 0; queue = queue[1:] {
		for _, l := range from[queue[0]] {
			if names[l.to] {
				continue
			}
			if len(names) > MaxChain {
				return names, true
			}
			names[l.to] = true
			ttl(l.ttl)
			queue = append(queue, l.to)
		}
	}
	return names, false
}
