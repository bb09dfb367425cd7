package resolve

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/renumber/renumber/internal/writer/model"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

var (
	in1 = netip.MustParsePrefix("2001:db8:1::/48")
	in2 = netip.MustParsePrefix("2001:db8:2::/48")
)

func TestAnAnswerIsTheAddressShortenedToTheLength(t *testing.T) {
	s := standing{}.after(Answer{Addrs: addrs("2001:db8:1:ff::1"), TTL: time.Minute}, nil, 48)
	if s.current != in1 || s.problem != "" || s.previous.IsValid() {
		t.Fatalf("standing %+v", s)
	}
	// The same prefix through another address: nothing moves.
	if s2 := s.after(Answer{Addrs: addrs("2001:db8:1:7::9"), TTL: time.Minute}, nil, 48); s2.current != in1 || s2.previous.IsValid() {
		t.Errorf("the same prefix moved the standing: %+v", s2)
	}
	// A new prefix: the old one is previous, with its answer's TTL (it drains
	// at least that long).
	s = s.after(Answer{Addrs: addrs("2001:db8:2::1"), TTL: 5 * time.Minute}, nil, 48)
	if s.current != in2 || s.previous != in1 || s.drain != time.Minute {
		t.Errorf("after the move: %+v", s)
	}
	r := s.report()
	if !r.Resolver || r.Node != s.server.String() || len(r.Digest.Links) != 1 || len(r.Digest.Links[0].Prefixes) != 2 ||
		r.Digest.Links[0].Prefixes[0].Prefix != in2 || !r.Digest.Links[0].Prefixes[1].Deprecated || r.Digest.Links[0].Prefixes[1].Remaining != time.Minute {
		t.Errorf("report %+v", r)
	}
}

func TestAnAnswerThatNamesNoOnePrefixIsAProblem(t *testing.T) {
	base := standing{}.after(Answer{Addrs: addrs("2001:db8:1::1"), TTL: time.Minute}, nil, 48)
	many := make([]netip.Addr, MaxRecords)
	for i := range many {
		many[i] = netip.MustParseAddr("2001:db8:1::1")
	}
	for _, tt := range []struct {
		name string
		a    Answer
		err  error
		want string
	}{
		{"a timeout", Answer{}, os.ErrDeadlineExceeded, ProblemNoAnswer},
		{"a refused connection", Answer{}, errors.New("read udp: connection refused"), ProblemNoAnswer},
		{"NXDOMAIN", Answer{RCode: dnsmessage.RCodeNameError}, nil, ProblemNoRecord},
		{"no AAAA record", Answer{}, nil, ProblemNoRecord},
		{"SERVFAIL", Answer{RCode: dnsmessage.RCodeServerFailure}, nil, "answers SERVFAIL"},
		{"REFUSED", Answer{RCode: dnsmessage.RCodeRefused}, nil, "answers REFUSED"},
		{"two prefixes", Answer{Addrs: addrs("2001:db8:1::1", "2001:db8:2::1")}, nil, ProblemSeveral},
		{"too many records", Answer{Addrs: many, TooMany: true}, nil, ProblemTooMany},
		{"a CNAME chain too long", Answer{LongChain: true}, nil, ProblemChain},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := base.after(tt.a, tt.err, 48)
			if s.problem != tt.want {
				t.Fatalf("problem %q, want %q", s.problem, tt.want)
			}
			r := s.report()
			if len(r.Digest.Links[0].Prefixes) != 0 || r.Problem != tt.want {
				t.Errorf("a server with a problem votes: %+v", r)
			}
			// Answering as before again restores its vote, and moves nothing.
			if s = s.after(Answer{Addrs: addrs("2001:db8:1::2"), TTL: time.Minute}, nil, 48); s.problem != "" || s.current != in1 || s.previous.IsValid() {
				t.Errorf("after the problem: %+v", s)
			}
		})
	}
}

func TestTheNextQuestionWaitsForTheLowestTTLWithinTheBounds(t *testing.T) {
	q := &model.DNSSource{MinInterval: 10 * time.Second, MaxInterval: 10 * time.Minute}
	answer := func(ttl time.Duration) standing {
		return standing{}.after(Answer{Addrs: addrs("2001:db8:1::1"), TTL: ttl}, nil, 48)
	}
	silent := standing{}.after(Answer{}, os.ErrDeadlineExceeded, 48)
	for _, tt := range []struct {
		name string
		ss   []standing
		want time.Duration
	}{
		{"the lowest TTL", []standing{answer(5 * time.Minute), answer(time.Minute)}, time.Minute},
		{"a TTL of 0 waits the lower bound", []standing{answer(0)}, 10 * time.Second},
		{"a day's TTL waits the upper bound", []standing{answer(24 * time.Hour)}, 10 * time.Minute},
		{"a silent server does not hurry the others", []standing{answer(time.Minute), silent}, time.Minute},
		{"nobody answers: the lower bound", []standing{silent, silent}, 10 * time.Second},
		{"no record: its negative TTL", []standing{standing{}.after(Answer{RCode: dnsmessage.RCodeNameError, TTL: 30 * time.Second}, nil, 48)}, 30 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := next(q, tt.ss); got != tt.want {
				t.Errorf("next %v, want %v", got, tt.want)
			}
		})
	}
}

func TestResolvConfServersAreReadCapped(t *testing.T) {
	conf := "search example\nnameserver 192.0.2.1\nnameserver fe80::1%eth0\nnameserver ::1\noptions ndots:5\nnameserver 192.0.2.3\n"
	got := parseResolvConf(strings.NewReader(conf), 2)
	if len(got) != 2 || got[0] != netip.MustParseAddrPort("192.0.2.1:53") || got[1] != netip.MustParseAddrPort("[::1]:53") {
		t.Errorf("servers %v", got)
	}
}
