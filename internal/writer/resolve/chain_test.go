package resolve

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// cname is a CNAME record from name to target.
func cname(name, target string, ttl uint32) dnsmessage.Resource {
	return dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeCNAME, Class: dnsmessage.ClassINET, TTL: ttl},
		Body: &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(target)}}
}

// chain is an answer whose CNAMEs lead from router.example.net. through n
// links to a name with one AAAA record, listed last link first (the order
// that costs a chaser that rescans the answer the most).
func chain(n int) *dnsmessage.Message {
	name := func(i int) string {
		if i == 0 {
			return "router.example.net."
		}
		return fmt.Sprintf("l%d.example.", i)
	}
	m := &dnsmessage.Message{Answers: []dnsmessage.Resource{aaaa(name(n), "2001:db8:1::1", 300)}}
	for i := n; i > 0; i-- {
		m.Answers = append(m.Answers, cname(name(i-1), name(i), uint32(1000+i)))
	}
	return m
}

var question = dnsmessage.MustNewName("router.example.net.")

// TestACNAMEChainIsFollowedForMaxChainLinks: a chain of up to MaxChain
// CNAMEs is followed, in any order, through loops; one longer is a problem,
// and none of the records past it is read.
func TestACNAMEChainIsFollowedForMaxChainLinks(t *testing.T) {
	looped := chain(2)
	looped.Answers = append(looped.Answers, cname("l2.example.", "router.example.net.", 5), cname("l1.example.", "l1.example.", 5))
	for _, tt := range []struct {
		name string
		m    *dnsmessage.Message
		want Answer
	}{
		{"no CNAME", chain(0), Answer{Addrs: addrs("2001:db8:1::1"), TTL: 300 * time.Second}},
		{"MaxChain links", chain(MaxChain), Answer{Addrs: addrs("2001:db8:1::1"), TTL: 300 * time.Second}},
		{"a loop", looped, Answer{Addrs: addrs("2001:db8:1::1"), TTL: 300 * time.Second}},
		{"one link more", chain(MaxChain + 1), Answer{LongChain: true}},
		{"3,000 links", chain(3000), Answer{LongChain: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := read(tt.m, question)
			if !slices.Equal(got.Addrs, tt.want.Addrs) || got.TTL != tt.want.TTL || got.LongChain != tt.want.LongChain || got.TooMany {
				t.Errorf("read %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestChasingCNAMEsCostsLinearWork: each record of an answer is read once
// however its CNAMEs are ordered or how long their chain is. Counted in
// allocations (each name read is one), not in time: a 3,000-link chain,
// last link first, cost a chaser that rescanned the answer per link 1.1 s of
// CPU per answer.
func TestChasingCNAMEsCostsLinearWork(t *testing.T) {
	for _, n := range []int{100, 3000} {
		m := chain(n)
		allocs := testing.AllocsPerRun(1, func() { read(m, question) })
		if bound := float64(8 * len(m.Answers)); allocs > bound {
			t.Errorf("%d links: %.0f allocations, want at most %.0f (8 per record)", n, allocs, bound)
		}
	}
}

func TestChaseFollowsAtMostMaxChainLinks(t *testing.T) {
	followed := 0
	names, long := chase(chain(3000).Answers, question, func(uint32) { followed++ })
	if !long || followed != MaxChain || len(names) != MaxChain+1 {
		t.Errorf("followed %d links to %d names (long %v), want %d links", followed, len(names), long, MaxChain)
	}
}

// FuzzAnswer plays a server that answers anything: whatever datagram it
// sends, reading it follows at most MaxChain CNAMEs, reads at most
// MaxRecords addresses (each one an AAAA record of the answer), and takes no
// TTL over MaxTTL.
func FuzzAnswer(f *testing.F) {
	for _, m := range []*dnsmessage.Message{chain(0), chain(2), chain(MaxChain + 1), chain(40)} {
		m.Header.Response = true
		m.Questions = []dnsmessage.Question{{Name: question, Type: dnsmessage.TypeAAAA, Class: dnsmessage.ClassINET}}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, datagram []byte) {
		var m dnsmessage.Message
		if m.Unpack(datagram) != nil {
			return
		}
		followed := 0
		if names, _ := chase(m.Answers, question, func(uint32) { followed++ }); followed > MaxChain || len(names) > MaxChain+1 {
			t.Fatalf("followed %d CNAMEs to %d names", followed, len(names))
		}
		a := read(&m, question)
		if len(a.Addrs) > MaxRecords || a.TTL > MaxTTL*time.Second || a.TTL < 0 {
			t.Fatalf("read %d addresses, TTL %s", len(a.Addrs), a.TTL)
		}
		for _, addr := range a.Addrs {
			if !slices.ContainsFunc(m.Answers, func(rr dnsmessage.Resource) bool {
				r, ok := rr.Body.(*dnsmessage.AAAAResource)
				return ok && netip.AddrFrom16(r.AAAA) == addr
			}) {
				t.Fatalf("read %s, which no AAAA record holds", addr)
			}
		}
	})
}
