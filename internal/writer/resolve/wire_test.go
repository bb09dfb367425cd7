package resolve

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/renumber/renumber/internal/writer/decide"
)

// serve runs a server on loopback that answers each question with what
// respond builds (nil: silence), over UDP and TCP on one port.
func serve(t *testing.T, respond func(q dnsmessage.Message, tcp bool) [][]byte) netip.AddrPort {
	t.Helper()
	// One port number for both: the UDP port the kernel picks may be taken
	// for TCP by another process (a world test beside), so pick again.
	var (
		pc   net.PacketConn
		ln   net.Listener
		addr netip.AddrPort
		err  error
	)
	for range 20 {
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		addr = netip.MustParseAddrPort(pc.LocalAddr().String())
		if ln, err = net.Listen("tcp", addr.String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(); ln.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var q dnsmessage.Message
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			for _, b := range respond(q, false) {
				pc.WriteTo(b, from)
			}
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var l [2]byte
			if _, err := io.ReadFull(c, l[:]); err == nil {
				b := make([]byte, binary.BigEndian.Uint16(l[:]))
				var q dnsmessage.Message
				if _, err := io.ReadFull(c, b); err == nil && q.Unpack(b) == nil {
					for _, r := range respond(q, true) {
						c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(r))), r...))
					}
				}
			}
			c.Close()
		}
	}()
	return addr
}

// reply builds the response to q with header h (ID and question from q
// unless h says otherwise) and the given answers and authorities.
func reply(t *testing.T, q dnsmessage.Message, h dnsmessage.Header, answers, authorities []dnsmessage.Resource) []byte {
	t.Helper()
	if h.ID == 0 {
		h.ID = q.Header.ID
	}
	h.Response = true
	m := dnsmessage.Message{Header: h, Questions: q.Questions, Answers: answers, Authorities: authorities}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func aaaa(name, addr string, ttl uint32) dnsmessage.Resource {
	return dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Class: dnsmessage.ClassINET, TTL: ttl},
		Body: &dnsmessage.AAAAResource{AAAA: netip.MustParseAddr(addr).As16()}}
}

func exchange(t *testing.T, server netip.AddrPort) (Answer, error) {
	t.Helper()
	return Wire{Timeout: 2 * time.Second}.Exchange(t.Context(), server, "router.example.net.")
}

func TestAForgedDatagramIsNotTheAnswer(t *testing.T) {
	srv := serve(t, func(q dnsmessage.Message, _ bool) [][]byte {
		forged := reply(t, q, dnsmessage.Header{ID: q.Header.ID + 1}, []dnsmessage.Resource{aaaa("router.example.net.", "2001:db8:bad::1", 60)}, nil)
		other := q
		other.Questions = []dnsmessage.Question{{Name: dnsmessage.MustNewName("other.example."), Type: dnsmessage.TypeAAAA, Class: dnsmessage.ClassINET}}
		wrongQuestion := reply(t, other, dnsmessage.Header{}, []dnsmessage.Resource{aaaa("other.example.", "2001:db8:bad::1", 60)}, nil)
		real := reply(t, q, dnsmessage.Header{}, []dnsmessage.Resource{aaaa("router.example.net.", "2001:db8:1::1", 60)}, nil)
		return [][]byte{forged, wrongQuestion, real}
	})
	a, err := exchange(t, srv)
	if err != nil || !slices.Equal(a.Addrs, addrs("2001:db8:1::1")) || a.TTL != time.Minute {
		t.Errorf("answer %+v, %v; want the server's own", a, err)
	}
}

func TestATruncatedAnswerIsAskedAgainOverTCP(t *testing.T) {
	srv := serve(t, func(q dnsmessage.Message, tcp bool) [][]byte {
		if !tcp {
			return [][]byte{reply(t, q, dnsmessage.Header{Truncated: true}, nil, nil)}
		}
		return [][]byte{reply(t, q, dnsmessage.Header{}, []dnsmessage.Resource{aaaa("router.example.net.", "2001:db8:1::1", 60)}, nil)}
	})
	if a, err := exchange(t, srv); err != nil || !slices.Equal(a.Addrs, addrs("2001:db8:1::1")) {
		t.Errorf("answer %+v, %v", a, err)
	}
}

func TestAnswersAreReadThroughCNAMEsWithTheLowestTTL(t *testing.T) {
	srv := serve(t, func(q dnsmessage.Message, _ bool) [][]byte {
		cname := dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName("router.example.net."), Class: dnsmessage.ClassINET, TTL: 30},
			Body: &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("home.ddns.example.")}}
		return [][]byte{reply(t, q, dnsmessage.Header{}, []dnsmessage.Resource{
			aaaa("home.ddns.example.", "2001:db8:1::1", 300), cname, aaaa("unrelated.example.", "2001:db8:bad::1", 1)}, nil)}
	})
	a, err := exchange(t, srv)
	if err != nil || !slices.Equal(a.Addrs, addrs("2001:db8:1::1")) || a.TTL != 30*time.Second {
		t.Errorf("answer %+v, %v", a, err)
	}
}

func TestANegativeAnswerWaitsItsSOAsTTL(t *testing.T) {
	srv := serve(t, func(q dnsmessage.Message, _ bool) [][]byte {
		soa := dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName("example.net."), Class: dnsmessage.ClassINET, TTL: 3600},
			Body: &dnsmessage.SOAResource{NS: dnsmessage.MustNewName("ns.example.net."), MBox: dnsmessage.MustNewName("h.example.net."), MinTTL: 45}}
		return [][]byte{reply(t, q, dnsmessage.Header{RCode: dnsmessage.RCodeNameError}, nil, []dnsmessage.Resource{soa})}
	})
	a, err := exchange(t, srv)
	if err != nil || a.RCode != dnsmessage.RCodeNameError || len(a.Addrs) != 0 || a.TTL != 45*time.Second {
		t.Errorf("answer %+v, %v", a, err)
	}
}

func TestASilentServerTimesOut(t *testing.T) {
	srv := serve(t, func(dnsmessage.Message, bool) [][]byte { return nil })
	_, err := Wire{Timeout: 200 * time.Millisecond}.Exchange(context.Background(), srv, "router.example.net.")
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("err %v, want a timeout", err)
	}
}

func TestATTLIsCappedAtSevenDays(t *testing.T) {
	for ttl, want := range map[uint32]time.Duration{1 << 31: 0, 1<<31 - 1: 7 * 24 * time.Hour, 3600: time.Hour} {
		srv := serve(t, func(q dnsmessage.Message, _ bool) [][]byte {
			return [][]byte{reply(t, q, dnsmessage.Header{}, []dnsmessage.Resource{aaaa("router.example.net.", "2001:db8:1::1", ttl)}, nil)}
		})
		if a, err := exchange(t, srv); err != nil || a.TTL != want {
			t.Errorf("TTL %d: answer %+v, %v; want a TTL of %v", ttl, a, err, want)
		}
	}
}

// The writer bounds a drain deadline read from the status by the longest
// TTL an answer is read as (decide.MaxTTL): the two are one number.
func TestTheLongestTTLReadIsTheLongestDrainBelieved(t *testing.T) {
	if got := time.Duration(MaxTTL) * time.Second; got != decide.MaxTTL {
		t.Errorf("resolve reads a TTL as at most %v, decide believes a drain of at most %v", got, decide.MaxTTL)
	}
}
