package decide

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
)

// A DynamicPrefix following a DNS name counts one vote per server, under the
// nodes' rules; nothing else counts for it, and its answers count nowhere else.

func byName() dynamicprefix.Spec {
	return dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DNS: &dynamicprefix.DNS{
		Name: "router.example.net", PrefixLength: 48, Servers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}}}}
}

var (
	pubA = netip.MustParsePrefix("2001:db8:1::/48")
	pubB = netip.MustParsePrefix("2001:db8:2::/48")
	pubX = netip.MustParsePrefix("2001:db8:bad::/48")
)

// answer is one server's report: the prefix it answers (invalid: none, for
// problem), and the one it answered before, draining for its TTL.
func answer(server string, p netip.Prefix, problem string, before ...netip.Prefix) Report {
	l := digest.Link{Name: "dns"}
	if p.IsValid() {
		l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: p})
	}
	for _, b := range before {
		l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: b, Deprecated: true, Remaining: 5 * time.Minute})
	}
	return Report{Node: server, Resolver: true, Problem: problem, Digest: digest.Node{Links: []digest.Link{l}}}
}

func TestAgreeingServersAreFollowed(t *testing.T) {
	d := For(parse(byName()), Status{}, []Report{answer("s1", pubA, ""), answer("s2", pubA, ""), answer("s3", pubA, "")}, t0)
	if d.Current != pubA || d.Source != "dns" || d.Reporting != 3 || len(d.Dissent) != 0 {
		t.Fatalf("decision %s, source %q, dissent %q", d, d.Source, d.Dissent)
	}
	// The router's record moves; a majority of the servers has it: the
	// prefix moves, the old one drains for maxInterval (or longer, for the
	// TTL of the answers that named it).
	d = For(parse(byName()), status(d), []Report{answer("s1", pubB, "", pubA), answer("s2", pubB, "", pubA), answer("s3", pubA, "")}, t0.Add(time.Hour))
	if d.Current != pubB || !slices.Equal(d.Pooled, []netip.Prefix{pubB, pubA}) {
		t.Fatalf("after the move: %s", d)
	}
	if exp := d.History[1].ExpiresAt; exp.IsZero() || !exp.Equal(t0.Add(time.Hour+10*time.Minute)) {
		t.Errorf("the replaced prefix drains until %v, want maxInterval from now (above its answers' TTL)", exp)
	}
	if want := []string{"s3: answers another prefix"}; !slices.Equal(d.Dissent, want) {
		t.Errorf("dissent %q, want %q", d.Dissent, want)
	}
	long := answer("s1", pubB, "", pubA)
	long.Digest.Links[0].Prefixes[1].Remaining = 2 * time.Hour
	d = For(parse(byName()), st0(t), []Report{long, long, answer("s3", pubB, "")}, t0.Add(time.Hour))
	if exp := d.History[1].ExpiresAt; exp.IsZero() || !exp.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("the replaced prefix drains until %v, want its answers' TTL of 2h from now", exp)
	}
}

// st0 is the status after every server answered A.
func st0(t *testing.T) Status {
	t.Helper()
	return status(For(parse(byName()), Status{}, []Report{answer("s1", pubA, ""), answer("s2", pubA, ""), answer("s3", pubA, "")}, t0))
}

func TestOneServerAloneMovesNothing(t *testing.T) {
	two := byName()
	two.Acquisition.DNS.Servers = two.Acquisition.DNS.Servers[:2]
	if d := For(parse(two), Status{}, []Report{answer("s1", pubX, ""), answer("s2", netip.Prefix{}, "no answer")}, t0); d.Current.IsValid() {
		t.Errorf("one answering server of two adopted %s", d.Current)
	}
	st := status(For(parse(two), Status{}, []Report{answer("s1", pubA, ""), answer("s2", pubA, "")}, t0))
	for _, tt := range []struct {
		name    string
		reports []Report
		dissent []string
	}{
		{"one lies", []Report{answer("s1", pubA, ""), answer("s2", pubX, "")}, []string{"s2: answers another prefix"}},
		{"one is silent, the other lies", []Report{answer("s1", netip.Prefix{}, "no answer"), answer("s2", pubX, "")},
			[]string{"s1: no answer", "s2: answers another prefix"}},
		{"one names nothing", []Report{answer("s1", pubA, ""), answer("s2", netip.Prefix{}, "no AAAA record")}, []string{"s2: no AAAA record"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := For(parse(two), st, tt.reports, t0.Add(time.Hour))
			if d.Changed || d.Current != pubA {
				t.Errorf("moved: %s", d)
			}
			if !slices.Equal(d.Dissent, tt.dissent) {
				t.Errorf("dissent %q, want %q", d.Dissent, tt.dissent)
			}
		})
	}
}

func TestAnAnswerOutsideTheFilterIsRejected(t *testing.T) {
	s := byName()
	s.Acquisition.PrefixFilter = &dynamicprefix.PrefixFilter{AllowedPrefixes: []string{"2001:db8::/32"}}
	out := netip.MustParsePrefix("2001:db9:1::/48")
	d := For(parse(s), Status{}, []Report{answer("s1", out, ""), answer("s2", out, ""), answer("s3", out, "")}, t0)
	if d.Current.IsValid() || len(d.Rejected) != 1 || d.Rejected[0].Nodes != 3 {
		t.Errorf("decision %s, rejected %+v", d, d.Rejected)
	}
}

func TestNodesAndServersNeverVoteForEachOther(t *testing.T) {
	nodes := reports(t, "v1;dns=2001:db8:bad::/48 p ra+addr", "v1;dns=2001:db8:bad::/48 p ra+addr", "v1;eth0=2001:db8:bad::/48 p ra+addr")
	if d := For(parse(byName()), Status{}, nodes, t0); d.Current.IsValid() || d.Reporting != 0 {
		t.Errorf("nodes' digests voted for a name: %s", d)
	}
	answers := []Report{answer("s1", pubA, ""), answer("s2", pubA, ""), answer("s3", pubA, "")}
	if d := For(parse(eth0()), Status{}, answers, t0); d.Current.IsValid() || d.Reporting != 0 {
		t.Errorf("servers' answers voted for router advertisements: %s", d)
	}
}

func TestAReplacedPrefixDrainsUntilItsDeadlineAlone(t *testing.T) {
	st := status(For(parse(byName()), Status{}, []Report{answer("s1", pubA, ""), answer("s2", pubA, ""), answer("s3", pubA, "")}, t0))
	// A new leader asked the servers afresh: nobody remembers A, nor its TTL.
	now := t0.Add(time.Hour)
	d := For(parse(byName()), st, []Report{answer("s1", pubB, ""), answer("s2", pubB, ""), answer("s3", pubB, "")}, now)
	if d.Current != pubB || len(d.History) != 2 || d.History[1].State != model.StateDraining {
		t.Fatalf("after the move: %s, history %+v", d, d.History)
	}
	if exp := d.History[1].ExpiresAt; exp.IsZero() || !exp.Equal(now.Add(10*time.Minute)) {
		t.Errorf("A drains until %v, want maxInterval from now", exp)
	}
	st = status(d)
	later := For(parse(byName()), st, []Report{answer("s1", pubB, ""), answer("s2", pubB, ""), answer("s3", pubB, "")}, now.Add(5*time.Minute))
	if later.History[1].State != model.StateDraining {
		t.Errorf("A, unreported, stopped draining before its deadline: %+v", later.History[1])
	}
	done := For(parse(byName()), st, []Report{answer("s1", pubB, ""), answer("s2", pubB, ""), answer("s3", pubB, "")}, now.Add(10*time.Minute))
	if done.History[1].State != model.StateExpired || !slices.Equal(done.Pooled, []netip.Prefix{pubB}) {
		t.Errorf("A at its deadline: %+v", done.History[1])
	}
}

func TestADrainWithoutADeadlineEndsWhenAFollowedNameReplacesTheRouters(t *testing.T) {
	// Following router advertisements, A was replaced by B with no lifetime
	// known; then the spec follows a name that answers B.
	st := Status{CurrentPrefix: pubB.String(), History: []HistoryEntry{
		{Prefix: pubB.String(), State: model.StateActive},
		{Prefix: pubA.String(), State: model.StateDraining},
	}}
	d := For(parse(byName()), st, []Report{answer("s1", pubB, ""), answer("s2", pubB, ""), answer("s3", pubB, "")}, t0)
	if !slices.Equal(d.Pooled, []netip.Prefix{pubB}) {
		t.Errorf("pooled %v: a drain no report holds and no deadline ends stays", d.Pooled)
	}
}
