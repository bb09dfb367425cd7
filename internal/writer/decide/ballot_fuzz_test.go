package decide

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/model"
)

// FuzzBallot plays one lying node against honest ones that follow a scripted
// router (issue 42: "One node"). The fuzzer chooses the script - renumberings,
// how long the old prefix stays valid, which honest node hears the router when,
// agent restarts, time passing - and every digest the liar writes on its Node,
// through the real digest encoding (garbage and deleted annotations too). The
// writer's ballot and decision run on a deterministic clock; after every step:
//
//   - the liar alone never changes the current prefix: a change it makes is
//     one the liar reporting as an honest node (any of them, or nothing) would
//     make too;
//   - the current prefix is within the default bounds (a /64 in 2000::/3);
//   - a replaced prefix stays pooled only while an honest node still reports
//     it (their silence counts);
//   - liveness: once every honest node (two or more) reports what the router
//     states, its one preferred prefix is current, and a replaced prefix every
//     honest node still reports is not ended before its deadline.
//
// A script whose first byte has its top bit set plays the DHCPv6-PD world
// instead (pdWorld: the liar as the client or the confirmer).
func FuzzBallot(f *testing.F) {
	f.Add([]byte{0, 3, 1, 60, 3, 5, 9, 1, 0, 0, 0, 1, 0, 3})
	f.Add([]byte{1, 5, 6, 1, 2, 0, 3, 0, 200, 3, 1, 0, 3, 5, 4, 0, 0, 255, 0, 3, 0, 255})
	f.Add([]byte{2, 2, 0, 3, 1, 30, 2, 0, 2, 1, 5, 8, 1, 1, 2, 3, 4, 5, 6, 7, 0, 100, 3})
	f.Add([]byte{0, 5, 3, 0, 0, 0, 1, 1, 3, 4, 0, 2, 1, 0, 9, 3, 0, 200, 0, 200})
	// DHCPv6-PD with the agents' own client: pdWorld (ballot_pd_test.go).
	f.Add([]byte{0x80, 5, 1, 1, 0, 3, 0, 30, 3})                            // the liar, first by name, is the client and forges
	f.Add([]byte{0xc0, 5, 1, 1, 0, 3, 3, 4, 1, 4, 2, 3, 0, 10, 3})          // the liar takes over when h0 goes NotReady
	f.Add([]byte{0xc2, 3, 4, 2, 3, 1, 3, 0, 30, 3, 1, 3, 5, 2, 0, 1, 4, 2}) // the liar confirms; the server renumbers
	f.Add([]byte{0x83, 5, 1, 0, 0, 3, 1, 0, 255, 3, 0, 255, 3})             // the liar client withholds a renumbering
	// The liar, first by name, is the client: the server renumbers, it
	// reports the new delegation (offered alike) and the old one deprecated
	// with 2^32-1 s left (before the offer's lifetime capped it: pooled
	// 136 years).
	f.Add([]byte{0x80, 5, 1, 0, 0, 3, 1, 3, 5, 2, 0, 0, 26, 4})
	f.Add([]byte{0x80, 5, 1, 0, 0, 3, 1, 3, 5, 2, 0, 0, 2, 4}) // the same, the old one with no lifetime
	// The same, but the liar admits the renumbering 55 s after the
	// confirmer was offered the new delegation: the old one drains no
	// longer than pdValid from that offer (before status.dhcpv6pd.
	// otherOffered: from the late switch, 55 s past the server's word).
	f.Add([]byte{0x80, 5, 1, 0, 0, 3, 3, 0, 10, 1, 3, 0, 10, 5, 2, 0, 0, 26, 4})
	// A rogue server starts once the delegation is current; past the bound
	// the roles rotate, and with the liar taking no part, nobody backs
	// anything (before the two-server rule: the rogue's offer, backed, took
	// the client over, whose Solicit the rogue won too).
	f.Add([]byte{0x82, 3, 0, 3, 3, 2, 0x80, 3, 0, 30, 3, 0, 30, 3, 0, 30, 3, 0, 30, 3, 0, 30, 3})
	// The server's lifetime schedule (an op of 0xc0 or more, pdlife_test.go):
	// the liar, first by name, is the client; the server lowers its
	// lifetime to 20 s, which the confirmer hears, then renumbers; the
	// liar says the old delegation has 2^32-1 s left. It drains 20 s from
	// the renumbering (with the agent publishing the longest lifetime
	// stated since the offer began, as before TestAServerShorteningItsLifetimeIsPublished:
	// ten minutes). Then, with the liar's digest fixed, the 20 s binding
	// nobody but the honest confirmers asks for moves at every Solicit:
	// before a second confirmer offered another took the client over, the
	// liar kept the role and B current for ever.
	f.Add([]byte{0x80, 5, 1, 0, 0, 3, 0xc0, 1, 3, 1, 3, 5, 2, 0, 0, 44, 4, 3, 0, 10, 3})
	// The same server counting down from an hour (each Advertise states
	// what is left, a Reply the hour), probed late in the count-down.
	f.Add([]byte{0x80, 5, 1, 0, 0, 0xc0, 0x84, 1, 5, 1, 0, 0, 3, 0, 100, 3, 0, 100, 3, 1, 3, 5, 2, 0, 0, 44, 4, 3, 0, 10, 3})
	// An infinite lifetime (0xffffffff) heard after a finite one: the
	// finite one bounds the drain.
	f.Add([]byte{0x80, 5, 1, 0, 0, 3, 0xc0, 5, 3, 1, 3, 5, 2, 0, 0, 44, 4, 3, 0, 10, 3})
	// A lifetime shorter than a pass (1 s), the liar client holding
	// nothing: each Solicit is given a fresh prefix, and the honest nodes
	// still land one (testdata 3eccae145562c86e, with four honest nodes,
	// two of them NotReady, did not before).
	f.Add([]byte{0x81, 5, 0, 0xc0, 0})
	// The liar confirmer states lifetimes both ways: longer than the
	// server's (it cannot raise the bound), then 1 s.
	f.Add([]byte{0xc3, 0xc0, 2, 3, 4, 2, 5, 1, 36, 1, 3, 5, 1, 12, 1, 1, 3, 0, 10, 3})
	// trustClientAfter 3m (bits 0x30: 1; the writer waits trustAfter, 6m),
	// the liar first by name and so the client, claiming a forged /56
	// while a second server keeps the confirmers from being offered
	// anything (the accomplice): past the bound the forgery is current,
	// on the liar's word alone - the price of the bound, and the check
	// allows it only then (a writer trusting at half the bound fails it).
	f.Add([]byte{0x90, 5, 1, 1, 0, 2, 0x80, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3, 0, 3, 3}) // 20 s a pass
	f.Fuzz(func(t *testing.T, script []byte) {
		// A longer script only repeats steps, and one run of it (a 15 KB
		// one: 3 s, uninstrumented) looked hung to the fuzzer.
		script = script[:min(len(script), maxScript)]
		s := &script
		if len(script) > 0 && script[0]&0x80 != 0 {
			b := next(s)
			newPDWorld(2+int(b)%3, b&0x40 == 0, trustAfters[b>>4&3]).run(t, s)
			return
		}
		w := newBallotWorld(2 + int(next(s))%3)
		for len(*s) > 0 {
			switch op := next(s) % 7; op {
			case 0: // time passes
				w.now = w.now.Add(time.Duration(1+int(next(s))*5) * time.Second)
			case 1: // the router renumbers; the old prefix stays valid that long (0: dropped)
				w.renumber(time.Duration(next(s)) * 10 * time.Second)
			case 2: // one honest node hears the router
				w.hear(int(next(s)) % len(w.honest))
			case 3: // every honest node does
				for i := range w.honest {
					w.hear(i)
				}
			case 4: // an honest agent restarts: it knows nothing until it hears the router again
				w.honest[int(next(s))%len(w.honest)].view = map[netip.Prefix]heard{}
			case 5, 6: // the liar writes whatever the fuzzer says
				w.lie(s, op == 6)
			}
			w.step(t)
		}
	})
}

// maxScript is the most of a script FuzzBallot plays.
const maxScript = 2048

func next(s *[]byte) byte {
	if len(*s) == 0 {
		return 0
	}
	b := (*s)[0]
	*s = (*s)[1:]
	return b
}

// routed is one prefix as the router states it.
type routed struct {
	preferred bool
	until     time.Time // valid until
}

// heard is one prefix as an honest agent reports it: the remaining lifetime
// frozen when it first heard it deprecated.
type heard struct {
	routed
	frozen time.Duration
}

type honestNode struct {
	reported bool
	view     map[netip.Prefix]heard
}

type ballotWorld struct {
	now     time.Time
	router  map[netip.Prefix]routed
	serial  int
	honest  []*honestNode
	liar    Node
	ballot  *shell
	m       model.Model
	st      Status
	expires map[netip.Prefix]time.Time // the deadline a liveness check holds a drain to
}

func newBallotWorld(n int) *ballotWorld {
	w := &ballotWorld{now: t0, router: map[netip.Prefix]routed{}, liar: Node{Name: "x"}, m: parse(eth0())}
	for range n {
		w.honest = append(w.honest, &honestNode{view: map[netip.Prefix]heard{}})
	}
	w.router[routerPrefix(0)] = routed{preferred: true}
	w.ballot = newShell(5*time.Minute, w.nodes, &noEvents{})
	return w
}

func routerPrefix(i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/64", 0x100+i))
}

func (w *ballotWorld) renumber(valid time.Duration) {
	for p, r := range w.router {
		if r.preferred {
			w.router[p] = routed{until: w.now.Add(valid)}
		}
	}
	w.serial++
	w.router[routerPrefix(w.serial)] = routed{preferred: true}
}

// hear brings honest node i up to what the router states now.
func (w *ballotWorld) hear(i int) {
	h := w.honest[i]
	h.reported = true
	view := map[netip.Prefix]heard{}
	for p, r := range w.router {
		if !r.preferred && !w.now.Before(r.until) {
			continue
		}
		e := heard{routed: r}
		if !r.preferred {
			e.frozen = r.until.Sub(w.now)
			if was, ok := h.view[p]; ok && !was.preferred {
				e.frozen = was.frozen
			}
		}
		view[p] = e
	}
	h.view = view
}

// digest is what an honest node writes now: what it heard, less what ran out.
func (h *honestNode) digest(now time.Time) string {
	l := digest.Link{Name: "eth0"}
	for p, e := range h.view {
		if !e.preferred && !now.Before(e.until) {
			continue
		}
		l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: p, Deprecated: !e.preferred,
			Remaining: max(e.frozen, time.Second), Sources: digest.SourceRA})
	}
	if len(l.Prefixes) > digest.MaxPrefixes {
		// The agent bounds its digest, dropping deprecated prefixes first
		// (observe.Snapshot); here the shortest-lived of them.
		slices.SortFunc(l.Prefixes, func(a, b digest.Prefix) int {
			if a.Deprecated != b.Deprecated {
				return cmpBool(a.Deprecated)
			}
			if c := cmp.Compare(b.Remaining, a.Remaining); c != 0 {
				return c
			}
			return digest.ComparePrefix(a.Prefix, b.Prefix)
		})
		l.Prefixes = l.Prefixes[:digest.MaxPrefixes]
	}
	s, err := digest.Encode(digest.Node{Links: []digest.Link{l}})
	if err != nil {
		panic(err)
	}
	return s
}

// lie sets the liar's annotation: raw bytes, or a digest built from the
// script and encoded (dropping its annotation when it encodes to nothing).
func (w *ballotWorld) lie(s *[]byte, raw bool) {
	n := int(next(s)) % 24
	if raw {
		b := make([]byte, 0, n)
		for range n {
			b = append(b, next(s))
		}
		w.liar.Digest, w.liar.Reported = string(b), true
		return
	}
	candidates := []netip.Prefix{netip.MustParsePrefix("2000::/3"), netip.MustParsePrefix("2001:db8:bad::/48"),
		netip.MustParsePrefix("2001:db8:bad::/64"), netip.MustParsePrefix("fd00::/64"), netip.MustParsePrefix("2001:db8:bad:1::/80")}
	lifetimes := []time.Duration{0, time.Second, 600 * time.Second, digest.MaxLifetime * time.Second}
	links := map[string]*digest.Link{}
	for range n % 6 {
		pick, state := int(next(s)), int(next(s))
		var p netip.Prefix
		if pick%2 == 0 {
			p = routerPrefix(max(w.serial-pick/2%3, 0)) // one the router states or stated
		} else {
			p = candidates[pick/2%len(candidates)]
		}
		name := []string{"eth0", "eth0", "eth0", "eth1"}[state/16%4]
		if links[name] == nil {
			links[name] = &digest.Link{Name: name, Conflict: state&64 != 0}
		}
		links[name].Prefixes = append(links[name].Prefixes, digest.Prefix{Prefix: p, Deprecated: state%5 != 0,
			Remaining: lifetimes[state%4], Sources: []digest.Source{digest.SourceRA, digest.SourceAddr, digest.SourcePD, digest.SourceRA | digest.SourceAddr}[state/4%4]})
	}
	var node digest.Node
	for _, name := range slices.Sorted(maps.Keys(links)) {
		node.Links = append(node.Links, *links[name])
	}
	v, err := digest.Encode(node)
	w.liar.Digest, w.liar.Reported = v, err == nil && n != 1
}

func (w *ballotWorld) nodes() []Node {
	out := []Node{w.liar}
	for i, h := range w.honest {
		n := Node{Name: fmt.Sprintf("h%d", i)}
		if h.reported {
			n.Digest, n.Reported = h.digest(w.now), true
		}
		out = append(out, n)
	}
	return out
}

// step is one pass of the writer, and the properties after it.
func (w *ballotWorld) step(t *testing.T) {
	t.Helper()
	reports, _ := w.ballot.Reports(w.now)
	prev := w.st
	prevCurrent, _ := netip.ParsePrefix(prev.CurrentPrefix)
	d := For(w.m, prev, reports, w.now)
	w.st = status(d)

	honest := map[string]digest.Node{}
	for i, h := range w.honest {
		if h.reported {
			n, err := digest.Decode(h.digest(w.now))
			if err != nil {
				t.Fatal(err)
			}
			honest[fmt.Sprintf("h%d", i)] = n
		}
	}
	// The liar alone never changes the current prefix - unless it is the only
	// agent the ballot knows of: every honest one still silent past the
	// StartupWait looks like a Node that runs none (the wait is bounded).
	alone := len(honest) == 0 && !w.now.Before(t0.Add(StartupWait))
	if d.Current != prevCurrent && !alone && !w.honestCould(prev, reports, honest, d.Current) {
		t.Fatalf("at %v the liar alone moved the prefix %v -> %v\nliar: %q\nreports: %+v", w.now.Sub(t0), prevCurrent, d.Current, w.liar.Digest, reports)
	}
	if d.Current.IsValid() && (d.Current.Bits() != 64 || !digest.GlobalUnicast(d.Current)) {
		t.Fatalf("current %v is outside the default bounds", d.Current)
	}
	reportedBy := func(p netip.Prefix) (some, all bool) {
		all = len(honest) == len(w.honest)
		for _, n := range honest {
			has := slices.ContainsFunc(n.Links[0].Prefixes, func(e digest.Prefix) bool { return e.Prefix == p })
			some, all = some || has, all && has
		}
		return some, all
	}
	// (Unless the liar is taken for the only agent, as above: its word on a
	// drain then counts as a one-node cluster's.)
	for _, p := range d.Pooled[min(1, len(d.Pooled)):] {
		if some, _ := reportedBy(p); !some && !alone {
			t.Fatalf("at %v %v still drains though no honest node reports it (liar: %q)\nhistory %+v", w.now.Sub(t0), p, w.liar.Digest, d.History)
		}
	}
	// Liveness: every honest node reports the router's one preferred prefix.
	var preferred []netip.Prefix
	for p, r := range w.router {
		if r.preferred {
			preferred = append(preferred, p)
		}
	}
	if len(w.honest) >= 2 && w.heardByAll() && d.Current != preferred[0] {
		t.Fatalf("at %v every honest node reports %v, current is %v (liar: %q)", w.now.Sub(t0), preferred[0], d.Current, w.liar.Digest)
	}
	// Liveness: a drain every honest node still reports ends by its deadline alone.
	for _, h := range d.History {
		p := netip.MustParsePrefix(h.Prefix)
		exp, held := w.expires[p]
		if _, all := reportedBy(p); h.State == model.StateExpired && held && all && len(w.honest) >= 2 && w.now.Before(exp) {
			t.Fatalf("at %v %v ended before its deadline %v while every honest node reports it (liar: %q)", w.now.Sub(t0), p, exp.Sub(t0), w.liar.Digest)
		}
	}
	w.expires = map[netip.Prefix]time.Time{}
	for _, h := range d.History {
		if h.State == model.StateDraining {
			exp := time.Unix(1<<40, 0)
			if !h.ExpiresAt.IsZero() {
				exp = h.ExpiresAt
			}
			w.expires[netip.MustParsePrefix(h.Prefix)] = exp
		}
	}
}

// heardByAll: every honest node has reported what the router states now.
func (w *ballotWorld) heardByAll() bool {
	for _, h := range w.honest {
		if !h.reported || len(h.view) == 0 {
			return false
		}
		for p, r := range w.router {
			e, ok := h.view[p]
			live := r.preferred || w.now.Before(r.until)
			if live != ok || ok && e.preferred != r.preferred {
				return false
			}
		}
	}
	return true
}

// honestCould says whether the liar, reporting as one of the honest nodes
// does, or nothing, or not at all, would make the same change.
func (w *ballotWorld) honestCould(prev Status, reports []Report, honest map[string]digest.Node, want netip.Prefix) bool {
	i := slices.IndexFunc(reports, func(r Report) bool { return r.Node == w.liar.Name && !r.Pending })
	if i < 0 {
		return true // the liar did not vote: the honest nodes moved it
	}
	empty, _ := digest.Decode("v1;eth0=")
	for _, stand := range append(slices.Collect(maps.Values(honest)), empty) {
		alt := slices.Clone(reports)
		alt[i].Digest = stand
		if For(w.m, prev, alt, w.now).Current == want {
			return true
		}
	}
	alt := slices.Delete(slices.Clone(reports), i, i+1)
	return For(w.m, prev, alt, w.now).Current == want
}

// cmpBool orders false before true.
func cmpBool(a bool) int {
	if a {
		return 1
	}
	return -1
}
