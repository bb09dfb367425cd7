package controller

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// servers stand for resolve.Sources: each entry is one server's answer
// ("": no answer).
type servers struct {
	ready   bool
	answers []string
	stopped []string
}

func (s *servers) Reports(_ context.Context, _ string, q *model.DNSSource) ([]decide.Report, bool) {
	var out []decide.Report
	for i, a := range s.answers {
		l := digest.Link{Name: "dns"}
		r := decide.Report{Node: q.Servers[i].String(), Resolver: true}
		if a == "" {
			r.Problem = "no answer"
		} else {
			l.Prefixes = []digest.Prefix{{Prefix: netip.MustParsePrefix(a)}}
		}
		r.Digest = digest.Node{Links: []digest.Link{l}}
		out = append(out, r)
	}
	return out, s.ready
}

func (s *servers) Stop(name string) { s.stopped = append(s.stopped, name) }

// followingAName is the fixture with home following a DNS name, asked of two
// servers, under a controller that reads them from s.
func followingAName(t *testing.T, s *servers) *fixture {
	f := newFixture(t, generous)
	f.edit(api.GVR, "home", `{"spec":{"acquisition":{"routerAdvertisement":null,"dns":{"name":"router.example.net","prefixLength":64,"servers":["192.0.2.1","192.0.2.2"]}}}}`)
	f.ctl = NewController(Config{Budget: generous, TargetKeys: holdings.DefaultTargetKeys, Resolvers: s},
		f, f.votes, f.dyn, f.meta, f.clock, slog.New(slog.NewTextHandler(io.Discard, nil)), f.events)
	f.catchUp()
	return f
}

func TestAFollowedNameMovesOnlyWithAMajorityOfItsServers(t *testing.T) {
	s := &servers{answers: []string{prefixA, prefixA}}
	f := followingAName(t, s)
	f.report(3, prefixB) // every node's digest says otherwise: it does not count here
	if got := f.sync(passHome); len(got) != 0 {
		t.Fatalf("before every server was asked, the pass wrote %q", got)
	}

	s.ready = true
	if got := f.sync(passHome); !slices.Contains(got, "patch ciliumloadbalancerippools lb") || !slices.Contains(got, "patch dynamicprefixes/status home") {
		t.Fatalf("the first answers wrote %q", got)
	}
	f.catchUp()
	if st := f.status(); st.CurrentPrefix != prefixA || st.PrefixSource != "dns" {
		t.Errorf("status follows %s from %s, want %s from dns", st.CurrentPrefix, st.PrefixSource, prefixA)
	}
	if c := f.condition(render.ResolversAgree); c.Status != metav1.ConditionTrue {
		t.Errorf("ResolversAgree %s %s", c.Status, c.Message)
	}
	if c := f.condition(render.RouterConflict); c.Type != "" {
		t.Errorf("a DynamicPrefix following a name says %s", c.Type)
	}
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("again, nothing changed: %q", got)
	}

	// One server lies: the status says so, once; no pool moves.
	s.answers = []string{prefixA, prefixB}
	if got, want := f.sync(passHome), []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
		t.Errorf("a lying server wrote %q, want %q", got, want)
	}
	f.catchUp()
	if c := f.condition(render.ResolversAgree); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "192.0.2.2:53: answers another prefix") {
		t.Errorf("ResolversAgree %s %q", c.Status, c.Message)
	}
	if blocks, _ := f.pool(); !slices.Contains(blocks, rangeOn(prefixA)) || slices.Contains(blocks, rangeOn(prefixB)) {
		t.Errorf("pool %q", blocks)
	}
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("the same lie again wrote %q", got)
	}

	// Both servers answer B: the pools follow.
	s.answers = []string{prefixB, prefixB}
	if got := f.sync(passHome); !slices.Contains(got, "patch ciliumloadbalancerippools lb") {
		t.Errorf("the move wrote %q", got)
	}
	if blocks, _ := f.pool(); !slices.Contains(blocks, rangeOn(prefixB)) {
		t.Errorf("pool %q", blocks)
	}

	// Back to router advertisements: the poll ends.
	f.edit(api.GVR, "home", `{"spec":{"acquisition":{"dns":null,"routerAdvertisement":{"interface":"eth0"}}}}`)
	f.catchUp()
	f.sync(passHome)
	if !slices.Contains(s.stopped, "home") {
		t.Error("the poll of a DynamicPrefix no longer following a name goes on")
	}
}
