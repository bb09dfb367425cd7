package decide

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// noEvents counts the garbled digests the ballot notes: each one the
// writer's shell reports as an event (controller.Ballot).
type noEvents struct{ n int }

func (e *noEvents) note(notes []Note) {
	for _, n := range notes {
		if n.Kind == Garbled {
			e.n++
		}
	}
}

// shell is the ballot over a Node cache the test edits, as the writer's
// shell runs it: each call reads the cache and reports the notes.
type shell struct {
	*Ballot
	nodes func() []Node
	ev    *noEvents
}

func newShell(grace time.Duration, nodes func() []Node, ev *noEvents) *shell {
	return &shell{Ballot: New(grace), nodes: nodes, ev: ev}
}

func (s *shell) Reports(now time.Time) ([]Report, time.Time) {
	out, wake, notes := s.Ballot.Reports(s.nodes(), now)
	s.ev.note(notes)
	return out, wake
}

func (s *shell) Votes(now time.Time) ([]Vote, time.Time) {
	out, wake, notes := s.Ballot.Votes(s.nodes(), now)
	s.ev.note(notes)
	return out, wake
}

func (b *Ballot) isLapsed(node string) bool { return b.lapsed[node] }

// nodes is a Node cache the test edits.
type nodes map[string]Node

func (n nodes) list() []Node {
	out := make([]Node, 0, len(n))
	for _, v := range n {
		out = append(out, v)
	}
	return out
}

func node(name, value, notReadySince string) Node {
	return Node{Name: name, Digest: value, Reported: true, NotReadySince: notReadySince}
}

func TestNodeRule(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	ev := &noEvents{}
	store := nodes{}
	r := newShell(5*time.Minute, store.list, ev)
	const a = "v1;eth0=2001:db8:a::/64 p ra+addr"
	for _, n := range []Node{
		node("fresh", a, ""), // no kubelet report yet (or Ready): votes
		node("ready", a, ""),
		node("flaky", a, "2026-11-21T11:58:00Z"),     // 2 min: still votes
		node("down", a, "2026-11-21T11:50:00Z"),      // 10 min: lapsed
		node("garbled", "v1;eth0=::/0 <script>", ""), // never votes
		{Name: "silent"},                             // no digest: not a vote, awaited
	} {
		store[n.Name] = n
	}
	got, wake := r.Reports(now)
	var names []string
	for _, rep := range got {
		names = append(names, fmt.Sprint(rep.Node, map[bool]string{true: " awaited"}[rep.Pending]))
	}
	if want := []string{"flaky", "fresh", "ready", "silent awaited"}; !slices.Equal(names, want) {
		t.Errorf("voting nodes = %v, want %v", names, want)
	}
	if want := now.Add(StartupWait); !wake.Equal(want) {
		t.Errorf("wake = %v, want %v (when silent is no longer awaited)", wake, want)
	}
	if _, wake := r.Reports(now.Add(StartupWait)); !wake.Equal(time.Date(2026, 11, 21, 12, 3, 0, 0, time.UTC)) {
		t.Errorf("wake = %v, want when flaky's vote lapses", wake)
	}
	if ev.n != 1 {
		t.Errorf("%d events, want 1 (the garbled digest)", ev.n)
	}
	// Every Node with a digest, and why it does not vote (kubectl renumber status).
	votes, _ := r.Votes(now)
	var judged []string
	for _, v := range votes {
		judged = append(judged, fmt.Sprintf("%s lapsed %v garbled %v", v.Node, v.Lapsed, v.Err != nil))
	}
	if want := []string{"down lapsed true garbled false", "flaky lapsed false garbled false", "fresh lapsed false garbled false",
		"garbled lapsed false garbled true", "ready lapsed false garbled false"}; !slices.Equal(judged, want) {
		t.Errorf("votes %q, want %q", judged, want)
	}
	if ev.n != 1 {
		t.Errorf("%d events after Votes, want 1: a garbled digest is reported once", ev.n)
	}
	// Three minutes later flaky lapses too; the garbled digest is not reported again.
	got, wake = r.Reports(now.Add(3 * time.Minute))
	if len(got) != 2 || !wake.IsZero() || ev.n != 1 {
		t.Errorf("later: %d voting, wake %v, %d events; want 2, none, 1", len(got), wake, ev.n)
	}
	if !r.isLapsed("down") || !r.isLapsed("flaky") || r.isLapsed("ready") {
		t.Errorf("lapsed = %v", r.lapsed)
	}
	// down is Ready again: it votes, and is no longer counted as lapsed.
	store["down"] = node("down", a, "")
	if got, _ := r.Reports(now.Add(4 * time.Minute)); len(got) != 3 || r.isLapsed("down") {
		t.Errorf("down back: %d voting, lapsed %v; want 3 and false", len(got), r.isLapsed("down"))
	}
	// A deleted Node is forgotten: nothing of it is kept.
	delete(store, "down")
	got, _ = r.Reports(now.Add(4 * time.Minute))
	if _, kept := r.decoded["down"]; len(got) != 2 || kept {
		t.Errorf("down deleted: %d voting, its digest kept %v; want 2 and false", len(got), kept)
	}
	// With the rule off every digest votes.
	r.grace = 0
	if got, _ := r.Reports(now.Add(4 * time.Minute)); len(got) != 3 {
		t.Errorf("rule off: %d voting, want 3", len(got))
	}
}

// A report says since when the ballot has read the node's digest as it is
// (Report.Since): the status's times are a stolen token's to forge, and
// decide counts the client's word from no earlier than this.
func TestAReportSaysSinceWhenItsDigestIsAsItIs(t *testing.T) {
	b := New(time.Minute)
	ns := nodes{"a": node("a", heldA, "")}
	for _, c := range []struct {
		name  string
		at    time.Duration
		value string
		want  time.Duration
	}{
		{"first read", 0, heldA, 0},
		{"read again", time.Minute, heldA, 0},
		{"changed", 2 * time.Minute, heldB, 2 * time.Minute},
		{"as it changed", 3 * time.Minute, heldB, 2 * time.Minute},
	} {
		ns["a"] = node("a", c.value, "")
		r, _, _ := b.Reports(ns.list(), t0.Add(c.at))
		if len(r) != 1 || !r[0].Since.Equal(t0.Add(c.want)) {
			t.Errorf("%s: %+v, want since %v", c.name, r, t0.Add(c.want))
		}
	}
}
