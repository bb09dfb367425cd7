// Sources polls the name of every DynamicPrefix that follows one, while the
// writer leads: each server once per round, rounds the answers' TTL apart,
// and a pass queued only when a round changed what the servers report.

package resolve

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"sync"

	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
)

var metricQuestions = metrics.NewCounterVec("renumber_writer_dns_questions_total",
	"Questions asked of DNS servers for acquisition.dns names, by result (answered: any answer; unanswered: none came).", "result")

// Collectors are the DNS source's metrics.
func Collectors() []metrics.Collector { return []metrics.Collector{metricQuestions} }

// attempts is how often one round asks a server that does not answer.
const attempts = 2

// Sources are the polls of every followed name.
type Sources struct {
	Exchanger Exchanger
	Clock     clock.Clock
	// Changed queues a pass over the DynamicPrefix whose reports changed.
	Changed func(name string)
	Log     *slog.Logger
	// ResolvConf lists the servers asked when a spec names none.
	ResolvConf func() []netip.AddrPort

	mu    sync.Mutex
	polls map[string]*poll
}

// poll is one DynamicPrefix's.
type poll struct {
	query  string // the DNSSource it asks, as text
	ctx    context.Context
	cancel context.CancelFunc
	ready  bool // a first round is done
	ss     []standing
}

// Reports returns the reports of the servers the DynamicPrefix name asks
// for q, polling them under ctx (the leader's term) from the first call on,
// and afresh when q changed or ctx's term ended; ready is false until every
// server was asked once (the pass is queued again then).
func (s *Sources) Reports(ctx context.Context, name string, q *model.DNSSource) (reports []decide.Report, ready bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.polls[name]
	if p == nil || p.query != q.String() || p.ctx.Err() != nil {
		ss := s.standings(q)
		if len(ss) == 0 {
			s.Log.Error(name+": acquisition.dns names no server and /etc/resolv.conf none either", "name", q.Name)
		}
		p = s.start(ctx, name, q, ss, false)
	}
	if !p.ready {
		return nil, false
	}
	return reportsOf(p.ss), true
}

// Stop ends name's poll (the DynamicPrefix is gone, or follows no name).
func (s *Sources) Stop(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.polls[name]; p != nil {
		p.cancel()
		delete(s.polls, name)
	}
}

// Prime returns name's reports at once: a poll's that is running, else those
// of a round asked now, from which the poll goes on (kubectl renumber
// status: what a pass would count now).
func (s *Sources) Prime(ctx context.Context, name string, q *model.DNSSource) []decide.Report {
	s.mu.Lock()
	if p := s.polls[name]; p != nil && p.query == q.String() && p.ctx.Err() == nil && p.ready {
		defer s.mu.Unlock()
		return reportsOf(p.ss)
	}
	s.mu.Unlock()
	ss := s.round(ctx, q, s.standings(q))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start(ctx, name, q, ss, true)
	return reportsOf(ss)
}

func reportsOf(ss []standing) []decide.Report {
	var out []decide.Report
	for _, st := range ss {
		out = append(out, st.report())
	}
	return out
}

func (s *Sources) standings(q *model.DNSSource) []standing {
	servers := q.Servers
	if len(servers) == 0 && s.ResolvConf != nil {
		servers = s.ResolvConf()
	}
	ss := make([]standing, len(servers))
	for i, sv := range servers {
		ss[i].server = sv
	}
	return ss
}

// start replaces name's poll (s.mu held) with one asking q under ctx from
// standings ss: asked says they are a round's answers already (the poll is
// ready, and its first question waits for their TTL).
func (s *Sources) start(ctx context.Context, name string, q *model.DNSSource, ss []standing, asked bool) *poll {
	if s.polls == nil {
		s.polls = map[string]*poll{}
	}
	if old := s.polls[name]; old != nil {
		old.cancel()
	}
	pctx, cancel := context.WithCancel(ctx)
	p := &poll{query: q.String(), ctx: pctx, cancel: cancel, ready: asked, ss: ss}
	s.polls[name] = p
	go s.run(pctx, name, p, q, ss, asked)
	return p
}

// run polls until ctx ends, from standings ss (asked: ss are a round's
// answers, so the first question waits for their TTL).
func (s *Sources) run(ctx context.Context, name string, p *poll, q *model.DNSSource, ss []standing, asked bool) {
	for {
		if asked {
			select {
			case <-ctx.Done():
				return
			case <-s.Clock.After(next(q, ss)):
			}
		}
		asked = true
		was := append([]standing(nil), ss...)
		ss = s.round(ctx, q, ss)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		changed := !p.ready
		for i := range ss {
			changed = !reflect.DeepEqual(was[i].report(), ss[i].report()) || changed
			s.logChange(name, q, was[i], ss[i], !p.ready)
		}
		p.ss, p.ready = ss, true
		s.mu.Unlock()
		if changed {
			s.Changed(name)
		}
	}
}

// round asks every server (in parallel) and returns their standings after.
func (s *Sources) round(ctx context.Context, q *model.DNSSource, ss []standing) []standing {
	out := append([]standing(nil), ss...)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			var a Answer
			var err error
			for range attempts {
				if a, err = s.Exchanger.Exchange(ctx, out[i].server, q.Name); err == nil || ctx.Err() != nil {
					break
				}
			}
			result := "answered"
			if err != nil {
				result = "unanswered"
			}
			metricQuestions.With(result).Inc()
			out[i] = out[i].after(a, err, q.Length)
		})
	}
	wg.Wait()
	return out
}

// logChange writes the journal's line for a server whose standing changed.
func (s *Sources) logChange(name string, q *model.DNSSource, was, now standing, first bool) {
	server := now.server.String()
	switch {
	case now.problem != "" && (first || now.problem != was.problem):
		s.Log.Warn(name+": "+server+": "+now.problem+" for "+q.Name, "detail", now.detail)
	case now.problem == "" && (first || was.problem != "" || now.current != was.current):
		var attrs []any
		if was.current.IsValid() && was.current != now.current {
			attrs = append(attrs, "was", was.current)
		}
		s.Log.Info(name+": "+server+" answers "+q.Name+" in "+now.current.String(), attrs...)
	}
}

// ResolvConf reads the nameservers of /etc/resolv.conf (port 53), at most
// model.MaxDNSServers.
func ResolvConf() []netip.AddrPort {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseResolvConf(f, model.MaxDNSServers)
}

func parseResolvConf(f io.Reader, limit int) []netip.AddrPort {
	var out []netip.AddrPort
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < limit {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		if a, err := netip.ParseAddr(fields[1]); err == nil && a.Zone() == "" {
			out = append(out, netip.AddrPortFrom(a.Unmap(), 53))
		}
	}
	return out
}
