// A server's standing: what it answers now, what it answered before (which
// drains for at least the TTL of the answer that named it), or why it names nothing.
// Pure: the sources poll, this decides what an answer means.

package resolve

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
)

// The problems a report states. They carry no detail that changes from one
// question to the next (ports, times), so that a status naming them is
// written once per change of them.
const (
	ProblemNoAnswer = "no answer"
	ProblemNoRecord = "no AAAA record"
	ProblemTooMany  = "more than 16 AAAA records"
	ProblemChain    = "a CNAME chain longer than 8"
	ProblemSeveral  = "addresses in more than one prefix"
)

// standing is one server's, between two questions.
type standing struct {
	server netip.AddrPort
	// current is the prefix of its last usable answer, ttl that answer's.
	current netip.Prefix
	ttl     time.Duration
	// previous is the prefix it answered before current, drain the TTL of
	// the last answer that named it.
	previous netip.Prefix
	drain    time.Duration
	// problem says why its last answer names no prefix ("": it names current).
	problem string
	// detail is the last answer's, for the log (not in a report).
	detail string
	// answered: the last question had an answer (of any kind), whose TTL
	// is wait.
	answered bool
	wait     time.Duration
}

// after is the standing after the server answered a (or failed with err),
// the prefix taken at length.
func (s standing) after(a Answer, err error, length int) standing {
	s.detail, s.answered, s.wait = "", err == nil, a.TTL
	switch {
	case err != nil:
		s.problem, s.detail, s.wait = ProblemNoAnswer, err.Error(), 0
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
			s.detail = "timeout"
		}
		return s
	case a.RCode == dnsmessage.RCodeNameError:
		s.problem = ProblemNoRecord
		return s
	case a.RCode != dnsmessage.RCodeSuccess:
		s.problem = "answers " + rcode(a.RCode)
		return s
	case a.TooMany:
		s.problem = ProblemTooMany
		return s
	case a.LongChain:
		s.problem = ProblemChain
		return s
	case len(a.Addrs) == 0:
		s.problem = ProblemNoRecord
		return s
	}
	var prefixes []netip.Prefix
	for _, addr := range a.Addrs {
		p, err := addr.Prefix(length)
		if err == nil && !slices.Contains(prefixes, p) {
			prefixes = append(prefixes, p)
		}
	}
	if len(prefixes) != 1 {
		s.problem, s.detail = ProblemSeveral, fmt.Sprint(prefixes)
		return s
	}
	if p := prefixes[0]; p != s.current {
		if s.current.IsValid() {
			s.previous, s.drain = s.current, s.ttl
		}
		s.current = p
	}
	s.problem, s.ttl = "", a.TTL
	return s
}

// rcode names a response code as RFC 1035 and its successors do.
func rcode(c dnsmessage.RCode) string {
	switch c {
	case dnsmessage.RCodeFormatError:
		return "FORMERR"
	case dnsmessage.RCodeServerFailure:
		return "SERVFAIL"
	case dnsmessage.RCodeNotImplemented:
		return "NOTIMP"
	case dnsmessage.RCodeRefused:
		return "REFUSED"
	}
	return fmt.Sprintf("RCODE %d", uint16(c))
}

// Link is the link name of a resolver's report.
const Link = "dns"

// report is the standing as the decision counts it: the current prefix while
// the server answers it, the previous one deprecated with its drain.
func (s standing) report() decide.Report {
	l := digest.Link{Name: Link}
	if s.problem == "" && s.current.IsValid() {
		l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: s.current})
	}
	if s.previous.IsValid() {
		l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: s.previous, Deprecated: true, Remaining: s.drain})
	}
	return decide.Report{Node: s.server.String(), Resolver: true, Problem: s.problem, Digest: digest.Node{Links: []digest.Link{l}}}
}

// next is the time until the next question: the lowest TTL the servers
// answered with, within the spec's bounds; the lower bound while none answers.
func next(q *model.DNSSource, ss []standing) time.Duration {
	wait := q.MaxInterval
	answered := false
	for _, s := range ss {
		if s.answered {
			wait, answered = min(wait, s.wait), true
		}
	}
	if !answered {
		return q.MinInterval
	}
	return max(wait, q.MinInterval)
}
