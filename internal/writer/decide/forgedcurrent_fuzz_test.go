package decide

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/model"
)

// FuzzAStolenTokenNamesTheCurrentPrefix plays a stolen writer token naming
// status.currentPrefix against honest nodes on a link with two routers
// (issue 42, red team r6b): the script moves each node's view of the real
// router's prefixes A and B and a second router's 2000::/64 (absent,
// preferred, deprecated), restarts agents, lets time pass, and writes the
// status as renumber-writer-status admits: any prefix the filter accepts
// made current and active, the one it replaces draining or dropped from
// history. After every pass: the current prefix, and every prefix pooled,
// is one some node reports, or the one the nodes elected (the last current
// some node reported) - or no prefix has a majority of the reporting
// nodes (then the current prefix holds whoever named it, as it does while
// the router is quiet: one node's word moves nothing) - or the token
// erased from the history every prefix it replaced that a node still
// reports, and a tie holds its prefix, reported (a limit: nothing in the
// ballot tells which of the tied the nodes elected).
func FuzzAStolenTokenNamesTheCurrentPrefix(f *testing.F) {
	// The red team's case: both routers' prefixes preferred on every node,
	// 2001:db8:bad::/64 named current, A draining (before: held by the tie).
	f.Add([]byte{0x01, 2, 0, 2, 1, 0, 11, 3, 3, 0, 0, 11})
	// The same, A dropped from history: the tie holds the token's prefix,
	// reported (the limit above).
	f.Add([]byte{0x01, 2, 0, 2, 1, 0, 11, 3, 3, 1, 0, 11})
	// The real router renumbers beside the second one, an agent restarts,
	// then the token names 2001:db8:bad::/64.
	f.Add([]byte{0x01, 2, 0, 2, 1, 0, 11, 2, 0, 1, 1, 2, 0, 0, 2, 4, 1, 0, 11, 3, 3, 0, 0, 11})
	f.Fuzz(func(t *testing.T, script []byte) {
		script = script[:min(len(script), maxScript)]
		s := &script
		prefixes := []netip.Prefix{netip.MustParsePrefix("2001:db8:a::/64"), netip.MustParsePrefix("2001:db8:b::/64"), netip.MustParsePrefix("2000::/64")}
		named := append(slices.Clone(prefixes), netip.MustParsePrefix("2001:db8:bad::/64"))
		views := make([]map[netip.Prefix]bool, 2+int(next(s))%3) // prefix -> preferred
		for i := range views {
			views[i] = map[netip.Prefix]bool{prefixes[0]: true}
		}
		m, now, st := parse(eth0()), t0, Status{}
		var elected netip.Prefix
		step := func() {
			var rs []Report
			reported := map[netip.Prefix]bool{}
			for i, v := range views {
				l := digest.Link{Name: "eth0"}
				for _, p := range prefixes {
					if preferred, ok := v[p]; ok {
						l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: p, Deprecated: !preferred, Remaining: 600 * time.Second, Sources: digest.SourceRA | digest.SourceAddr})
						reported[p] = true
					}
				}
				rs = append(rs, Report{Node: string(rune('a' + i)), Digest: digest.Node{Links: []digest.Link{l}}})
			}
			d := For(m, st, rs, now)
			// A majority of the reporting nodes prefers one prefix: without
			// one, a current prefix holds whether or not anyone reports
			// it, so that one node cannot move a cluster whose router
			// went quiet.
			majority := slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return d.Votes[p] >= max(m.Quorum, d.Reporting/2+1) })
			// The token erased what it replaced: a tie holds its prefix.
			erased := !slices.ContainsFunc(st.History, func(e HistoryEntry) bool {
				p, err := netip.ParsePrefix(e.Prefix)
				return err == nil && e.State == model.StateDraining && reported[p]
			}) && slices.ContainsFunc(d.Rejected, func(r Rejected) bool { return strings.Contains(r.Reason, "ties with") })
			for _, p := range append([]netip.Prefix{d.Current}, d.Pooled...) {
				if p.IsValid() && !reported[p] && p != elected && majority && !(erased && p.String() == st.CurrentPrefix) {
					t.Fatalf("at %v %v is current or pooled (current %v, pooled %v): no node reports it, and the nodes elected %v\nstatus read %+v", now.Sub(t0), p, d.Current, d.Pooled, elected, st)
				}
			}
			if reported[d.Current] {
				elected = d.Current
			}
			st = status(d)
		}
		for step(); len(*s) > 0; step() {
			tokenMove(s, views, prefixes, named, &now, &st)
		}
	})
}

// tokenMove plays one move of the token's scripts
// (FuzzAStolenTokenNamesTheCurrentPrefix,
// FuzzATokensCurrentIsWhatAnHonestWriterElects): time passes; one node's
// view of a prefix changes, or every node's; the token names the current
// prefix as renumber-writer-status admits (any prefix the filter accepts
// made current and active, the one it replaces draining or dropped from
// history); or an agent restarts, reporting nothing until it hears the
// routers again.
func tokenMove(s *[]byte, views []map[netip.Prefix]bool, prefixes, named []netip.Prefix, now *time.Time, st *Status) {
	switch op := next(s) % 5; op {
	case 0:
		*now = now.Add(time.Duration(1+int(next(s))) * 5 * time.Second)
	case 1, 2:
		i, p, state := int(next(s)), prefixes[int(next(s))%len(prefixes)], next(s)%3
		for j, v := range views {
			if op == 2 || j == i%len(views) {
				if delete(v, p); state > 0 {
					v[p] = state == 1
				}
			}
		}
	case 3:
		p, drop := named[int(next(s))%len(named)], next(s)%2 == 1
		h := []HistoryEntry{{Prefix: p.String(), State: model.StateActive, AcquiredAt: now.Truncate(time.Second)}}
		for _, e := range st.History {
			if e.Prefix == p.String() || drop && e.Prefix == st.CurrentPrefix {
				continue
			}
			if e.State == model.StateActive {
				e.State, e.DeprecatedAt = model.StateDraining, now.Truncate(time.Second)
			}
			h = append(h, e)
		}
		*st = Status{CurrentPrefix: p.String(), PrefixSource: st.PrefixSource, History: h}
	case 4:
		clear(views[int(next(s))%len(views)])
	}
}
