// The node rule (Ballot): which Nodes' digests vote, decoded once per
// value, with a garbled digest or a vote that lapses noted once (Note): the
// rule does no I/O, and the stage that owns side effects (controller.Ballot)
// logs the notes, emits their events and counts them.
//
// A Node's digest votes while the Node exists and is Ready, or has not been
// Ready for less than the grace. A Node with no Ready condition (no kubelet has
// reported yet) votes. A Node gone NotReady past the grace stops voting: the
// prefixes only it reported drain, and the current prefix stays unless the
// nodes still voting choose another. A deleted Node stops voting at once. An
// agent that died on a Ready node leaves its last digest voting; its deprecated
// prefixes still expire by their deadlines (status.history[].expiresAt).
//
// A Node without a digest is awaited for StartupWait (Await) from when the
// ballot first sees it, unless it is not Ready: it votes for nothing, but
// counts toward the majority a first adoption needs (Report.Pending), so that
// on a fresh install the first agent to report does not decide alone, while a
// Node that runs no agent delays the first adoption by that wait at most.

package decide

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/digest"
)

// Node is what the ballot reads of one Node (the Node cache keeps it so:
// caches.NodeView).
type Node struct {
	Name string
	UID  string
	// Digest is the node's digest annotation; Reported says it has one.
	Digest   string
	Reported bool
	// Bytes is the annotation's real size when the cache kept only the
	// start of it (longer than any digest); 0 when it kept it whole.
	Bytes int
	// NotReadySince is when its Ready condition last turned False or
	// Unknown (RFC 3339); "" while it is Ready or has none.
	NotReadySince string
}

// Ballot is the node rule and what it remembers between passes: each
// Node's digest decoded once per value, the garbled values and lapsed votes
// already noted, and when each Node was first seen. It does no I/O and
// takes no lock: the caller holds it (controller.Ballot) and reports the
// notes it returns.
type Ballot struct {
	grace   time.Duration
	wait    time.Duration        // how long a Node without a digest is awaited
	decoded map[string]decoded   // node -> its digest, decoded once per value
	bad     map[string]string    // node -> garbled digest value already noted
	lapsed  map[string]bool      // nodes whose vote lapsed (not Ready past the grace)
	first   map[string]time.Time // node -> when the ballot first saw it
}

// StartupWait is how long the ballot awaits a Node's first digest: the spread
// of agents starting on a fresh install, image pulls included.
const StartupWait = time.Minute

// Await sets how long the ballot awaits a Node's first digest (the writer's
// --node-startup-wait).
func (b *Ballot) Await(d time.Duration) { b.wait = d }

// Grace is how long a not-Ready Node's digest still votes (0: the rule is
// off).
func (b *Ballot) Grace() time.Duration { return b.grace }

// New returns a ballot; grace 0 turns the rule off (every digest votes).
func New(grace time.Duration) *Ballot {
	return &Ballot{grace: grace, decoded: map[string]decoded{}, bad: map[string]string{},
		lapsed: map[string]bool{}, first: map[string]time.Time{}, wait: StartupWait}
}

type decoded struct {
	value string
	node  digest.Node
	err   error
	since time.Time // when a vote first read this value (Report.Since)
}

// NoteKind is what a Note tells.
type NoteKind int

const (
	// Garbled: the Node's digest cannot be read (Note.Err says why); noted
	// once per value.
	Garbled NoteKind = iota + 1
	// Lapsed: the Node is not Ready past the grace; its digest no longer
	// votes.
	Lapsed
	// Votes: the Node whose vote lapsed is Ready again.
	Votes
)

// Note is one change the ballot saw, to be reported once.
type Note struct {
	Kind NoteKind
	Node Node
	Err  error // Garbled: why
}

// decode decodes a node's digest, once per value.
func (b *Ballot) decode(m Node) (digest.Node, error) {
	if d, ok := b.decoded[m.Name]; ok && d.value == m.Digest {
		return d.node, d.err
	}
	n, err := digest.Decode(m.Digest)
	if m.Bytes > len(m.Digest) {
		// The cache kept only the start: say how long it really is.
		n, err = digest.Node{}, fmt.Errorf("%w: %d bytes, at most %d", digest.ErrInvalid, m.Bytes, digest.MaxBytes)
	}
	b.decoded[m.Name] = decoded{value: m.Digest, node: n, err: err}
	return n, err
}

// since is when a vote first read node's digest as it is now.
func (b *Ballot) since(node string, now time.Time) time.Time {
	d := b.decoded[node]
	if d.since.IsZero() {
		d.since = now
		b.decoded[node] = d
	}
	return d.since
}

// Vote is one Node with a digest, as the ballot judges it at a time.
type Vote struct {
	Report
	// Err: the digest cannot be read; it does not vote.
	Err error
	// Lapsed: not Ready past the grace; it does not vote.
	Lapsed bool
}

// Reports returns the digests of nodes that vote at now, then the Nodes
// still awaited (Pending), and when the next vote lapses or wait ends (zero
// if none will); and what changed, noted once (garbled digests, lapsed
// votes).
func (b *Ballot) Reports(nodes []Node, now time.Time) ([]Report, time.Time, []Note) {
	votes, wake, notes := b.Votes(nodes, now)
	var out []Report
	for _, v := range votes {
		if v.Err == nil && !v.Lapsed {
			out = append(out, v.Report)
		}
	}
	pending, until := b.awaited(nodes, now)
	if !until.IsZero() && (wake.IsZero() || until.Before(wake)) {
		wake = until
	}
	return append(out, pending...), wake, notes
}

// awaited returns the Nodes without a digest still within StartupWait of
// when the ballot first saw them, and not known to be not Ready, by name; and
// when the first of those waits ends.
func (b *Ballot) awaited(nodes []Node, now time.Time) ([]Report, time.Time) {
	var out []Report
	var wake time.Time
	for _, m := range nodes {
		first, ok := b.first[m.Name]
		if !ok {
			first = now
			b.first[m.Name] = now
		}
		if m.Reported || m.NotReadySince != "" || !now.Before(first.Add(b.wait)) {
			continue
		}
		out = append(out, Report{Node: m.Name, Pending: true})
		if end := first.Add(b.wait); wake.IsZero() || end.Before(wake) {
			wake = end
		}
	}
	if len(b.first) > len(nodes) {
		present := make(map[string]bool, len(nodes))
		for _, m := range nodes {
			present[m.Name] = true
		}
		maps.DeleteFunc(b.first, func(n string, _ time.Time) bool { return !present[n] })
	}
	slices.SortFunc(out, func(a, b Report) int { return strings.Compare(a.Node, b.Node) })
	return out, wake
}

// Votes returns every Node with a digest, by name, each with its decoded
// digest or why it does not vote, when the next vote lapses (zero if none
// will), and what changed, noted once (garbled digests, lapsed votes).
func (b *Ballot) Votes(nodes []Node, now time.Time) ([]Vote, time.Time, []Note) {
	var out []Vote
	var notes []Note
	var wake time.Time
	reporting := 0
	for _, m := range nodes {
		if !m.Reported {
			continue
		}
		reporting++
		lapse, notReady := b.lapse(m, now)
		vote := Vote{Report: Report{Node: m.Name, NotReady: notReady}}
		lapsed := notReady && !now.Before(lapse)
		if was := b.lapsed[m.Name]; lapsed && !was {
			b.lapsed[m.Name] = true
			notes = append(notes, Note{Kind: Lapsed, Node: m})
		} else if !lapsed && was {
			delete(b.lapsed, m.Name)
			notes = append(notes, Note{Kind: Votes, Node: m})
		}
		if lapsed {
			// Decoded to be shown (kubectl renumber status), never noted.
			vote.Lapsed = true
			vote.Digest, vote.Err = b.decode(m)
			out = append(out, vote)
			continue
		}
		if notReady && (wake.IsZero() || lapse.Before(wake)) {
			wake = lapse
		}
		vote.Digest, vote.Err = b.decode(m)
		vote.Since = b.since(m.Name, now)
		if vote.Err != nil {
			if b.bad[m.Name] != m.Digest {
				notes = append(notes, Note{Kind: Garbled, Node: m, Err: vote.Err})
			}
			b.bad[m.Name] = m.Digest
		} else {
			delete(b.bad, m.Name)
		}
		out = append(out, vote)
	}
	b.forgetGone(nodes, reporting)
	slices.SortFunc(out, func(a, b Vote) int { return strings.Compare(a.Node, b.Node) })
	return out, wake, notes
}

// lapse returns when a not-Ready node's vote lapses (false when it is Ready or
// the rule is off).
func (b *Ballot) lapse(m Node, now time.Time) (time.Time, bool) {
	since := m.NotReadySince
	if since == "" || b.grace <= 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, since)
	if err != nil {
		t = now // no usable transition time: the grace starts when we saw it
	}
	return t.Add(b.grace), true
}

// forgetGone drops what is remembered of Nodes deleted or without a digest.
// Every map holds only Nodes that reported a digest, so while none holds more
// entries than Nodes report now (the usual pass) there is nothing to look for.
func (b *Ballot) forgetGone(nodes []Node, reporting int) {
	if len(b.decoded) <= reporting && len(b.lapsed) <= reporting && len(b.bad) <= reporting {
		return
	}
	present := make(map[string]bool, reporting)
	for _, m := range nodes {
		if m.Reported {
			present[m.Name] = true
		}
	}
	maps.DeleteFunc(b.lapsed, func(n string, _ bool) bool { return !present[n] })
	maps.DeleteFunc(b.bad, func(n, _ string) bool { return !present[n] })
	maps.DeleteFunc(b.decoded, func(n string, _ decoded) bool { return !present[n] })
}

// Node states, as the writer's renumber_writer_nodes gauge counts them.
const (
	NodeReporting = "reporting" // a valid digest
	NodeMissing   = "missing"   // no digest annotation
	NodeInvalid   = "invalid"   // a garbled digest
	NodeNotReady  = "not-ready" // not Ready past the grace: not voting
)

// State is m's state as the ballot last judged it (decoding its digest
// once, as a pass would).
func (b *Ballot) State(m Node) string {
	if !m.Reported {
		return NodeMissing
	}
	switch _, err := b.decode(m); {
	case b.lapsed[m.Name]:
		return NodeNotReady
	case err != nil:
		return NodeInvalid
	}
	return NodeReporting
}
