// For decides, from every node's digest, which prefix a
// DynamicPrefix currently follows and which earlier prefixes are still draining.
// Pure and deterministic: the same reports, spec and previous status give the
// same decision, and a decision with nothing new reproduces the previous status's
// history exactly (timestamps included), so an unchanged world writes nothing.
//
// Rules:
//   - A node votes for each acceptable prefix it reports as preferred on a link
//     the DynamicPrefix follows (its interface, or every link when none is named).
//   - Acceptable: what the spec's model accepts (model.Model.Accept: inside
//     2000::/3 unless the filter is off, inside one of allowedPrefixes when set,
//     within the length bounds - an RA's /64, a delegation's /48 to /64, unless
//     the spec sets them). A source the DynamicPrefix does not follow on that
//     link is dropped: a node calling its prefix delegated there claims nothing.
//   - The current prefix changes only to a prefix with at least quorum votes and
//     strictly more votes than the current one: nodes that disagree for a moment
//     during a change, or a rogue router reaching one node, cannot flip it. A
//     current prefix a majority of the voting nodes still prefers stays: where
//     the router offers two, one node's vote cannot flip between them.
//   - No single node decides: the first adoption, and a change away from a
//     current prefix no node prefers to the new one (a node preferring both
//     holds neither), need votes from a majority of the reporting nodes too
//     (and quorum); the first adoption counts the
//     nodes the ballot still awaits as well (Report.Pending: a Node whose
//     agent has not reported yet, for a short wait), so that the first agent
//     up on a fresh install does not decide alone. Delegated prefixes are the
//     exception: a DHCPv6 client runs on one node or a few.
//   - With the agents' own DHCPv6 client, only the client node's delegation
//     (and, during a handover, the previous client's) counts: another node
//     reporting a delegated prefix is not the client's word. A delegation
//     other than the current prefix counts only while a second node, the
//     confirmer, reports the server offering it alike (confirm.go).
//   - A replaced prefix drains: it stays in the pools until a majority of the
//     voting nodes no longer reports it (its valid lifetime ran out there), until
//     the lifetime frozen in the digests at deprecation passes (expiresAt, set
//     once: the lower median, over every voting node, of what each has left -
//     none for a node silent about it, no bound for one that still prefers it or
//     names no lifetime), or until maxPrefixHistory newer prefixes pushed it
//     out. Silence is a vote: one node reporting it, with any lifetime or none,
//     cannot keep it draining. A delegation's voters are the nodes that hold
//     one (where a DHCPv6 client runs); with the agents' own client, its
//     deadline is capped by the shortest valid lifetime a confirmer heard
//     the server state for it while current (confirm.go).
//   - Nodes whose agents hear one router address contradict itself are listed
//     (Conflicting): their digests carry the last agreed prefixes.
//   - A DynamicPrefix following a DNS name (acquisition.dns) counts the
//     resolvers' reports alone, one per server, under the same rules: a
//     server is a voter, one that does not answer reports nothing and still
//     counts toward the majority, so one server alone, lying or silent, never
//     moves the prefix while another is configured. No Node's digest counts
//     there, and no resolver's report counts anywhere else. Servers that do
//     not answer the current prefix are listed (Dissent). A replaced prefix
//     drains for maxInterval, or the TTL of the answers that named it if
//     longer.

package decide

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/model"
)

// Report is one node's decoded digest.
type Report struct {
	Node   string
	Digest digest.Node
	// NotReady: the Node is not Ready, but votes still (within the grace).
	NotReady bool
	// Resolver: a DNS server's answer (Node is the server), not a Node's
	// digest; Problem says why it names no prefix ("" when it answered).
	Resolver bool
	Problem  string
	// Pending: a Node expected to report that has not yet (the ballot's
	// startup wait): it counts toward the majority a first adoption needs,
	// and votes for nothing.
	Pending bool
	// Since is when this writer's ballot first saw the digest as it is now
	// (zero: unknown). The status is the writer's memory, and a stolen
	// token writes it: a time it names before the writer heard the claim
	// it dates is not believed (trust).
	Since time.Time
}

// Rejected is a prefix some node reported that the spec does not accept.
type Rejected struct {
	Prefix netip.Prefix
	Reason string
	Nodes  int
}

// Decision is what the writer should make true.
type Decision struct {
	Current netip.Prefix // invalid when no prefix was ever acquired
	Source  string       // status.prefixSource
	// Changed: Current differs from the previous status.
	Changed bool
	// History is the rendered status.history, newest first, active entry first.
	History []HistoryEntry
	// Pooled is every prefix whose entries belong in the pools: current first,
	// then draining ones, newest first.
	Pooled []netip.Prefix
	// Managed are the prefixes the previous status names (current and
	// history) and Pooled: what the existing operator's geometric rule claims
	// entries inside of, in an object that carries no ownership record.
	Managed  []netip.Prefix
	Rejected []Rejected
	Votes    map[netip.Prefix]int
	// Reporting is how many nodes sent a usable digest for this DynamicPrefix.
	Reporting int
	// Pending is how many more nodes the ballot awaits (Report.Pending): the
	// first adoption needs a majority of them and Reporting.
	Pending int
	// Unreported: there is a current prefix, but no voting node reports it any
	// more, preferred or deprecated (the router went quiet, or every agent lost
	// the link). It stays current and pooled: Services keep working.
	Unreported bool
	// Wake is when the decision changes by time alone (a drain deadline).
	Wake time.Time
	// PDClient is the node whose agent runs the DHCPv6 client ("": none).
	PDClient string
	// PDStalled: the client and the confirmer, with nobody else eligible,
	// have disagreed longer than the server's stated lifetime
	// (Confirmation.StallsAt): nothing moves, and the stall is reported.
	PDStalled bool
	// Confirm is the confirmation of the client's delegation (confirm.go).
	Confirm Confirmation
	// Conflicting are the voting nodes whose agents report a router
	// conflict on a followed link, sorted.
	Conflicting []string
	// Dissent lists, for a DynamicPrefix following a DNS name, each server
	// that does not answer the current prefix and why ("server: why"), in
	// the order of the reports.
	Dissent []string
}

type tally struct {
	votes     int
	seen      int
	remaining []time.Duration // each node's, reporting it deprecated (0: no lifetime named)
	ra, pd    bool
	dns       bool
}

// unbounded is a drain without a deadline: a majority of the voters still
// prefer the prefix, or name no lifetime for it.
const unbounded = time.Duration(1<<63 - 1)

// drain is how long a replaced prefix may drain, as the voters nodes
// report it: the lower median over all of them, a node silent about it
// counting as nothing left, one preferring it or naming no lifetime as
// unbounded. 0: a majority is silent about it, and it ends. One node
// reporting a huge lifetime, or none, cannot keep it draining.
//
// The servers of a followed name (dns) keep their own rule: the lower median
// of what those naming it deprecated name (history adds maxInterval).
func (t *tally) drain(voters int) time.Duration {
	if t == nil {
		return 0
	}
	if t.dns {
		if len(t.remaining) == 0 {
			return 0
		}
		r := slices.Clone(t.remaining)
		slices.Sort(r)
		return r[(len(r)-1)/2]
	}
	var named []time.Duration
	forever := t.votes
	for _, r := range t.remaining {
		if r > 0 {
			named = append(named, r)
		} else {
			forever++
		}
	}
	slices.Sort(named)
	silent := max(voters-len(named)-forever, 0)
	switch k := (silent + len(named) + forever - 1) / 2; {
	case k < silent:
		return 0
	case k < silent+len(named):
		return named[k-silent]
	}
	return unbounded
}

// For computes the decision for one DynamicPrefix (its spec parsed to m) at now.
func For(m model.Model, prev Status, reports []Report, now time.Time) Decision {
	seen := map[netip.Prefix]*tally{}
	rejected := map[netip.Prefix]*Rejected{}
	d := Decision{Votes: map[netip.Prefix]int{}}
	// Masked, as the writer writes it: a stolen token's current prefix in
	// another text (2001:db8:1::5/64) is the prefix it names, not a
	// renumbering (history keys its entries so too).
	prevCurrent := currentPrefix(prev)
	if m.DHCPv6PD && m.PDClient && m.PDTakenBy == "" {
		// Another DynamicPrefix's client runs on this link (PDTakenBy):
		// no client, no confirmer, and no delegation counts (pdClient).
		d.PDClient, d.Confirm = confirm(m, prev, reports, now)
	}
	pdVoters := 0 // nodes holding a delegation this DynamicPrefix counts
	// ballots: each voting node's votes (the prefixes it prefers).
	var ballots []map[netip.Prefix]bool
	var handover handover
	// A delegation the status holds draining: the client's word that it is
	// deprecated counts unconfirmed (the server offers the confirmer only
	// the binding it has now, so nothing confirms a replaced one), as it
	// did before the renumbering - it only keeps a prefix that was current
	// in the pools, never adds one, and never past the drain's deadline,
	// frozen at the transition (a drain without one, from a lifetime
	// stated infinite, is not exempt: the client's word alone would keep
	// it for ever).
	draining := map[netip.Prefix]bool{}
	for _, h := range prev.History {
		if p, err := netip.ParsePrefix(h.Prefix); err == nil && h.State == model.StateDraining && !h.ExpiresAt.IsZero() {
			draining[p.Masked()] = true
		}
	}
	for _, r := range reports {
		if r.Resolver != (m.DNS != nil) {
			continue // a digest where a name is followed, or an answer where none is
		}
		if r.Pending {
			d.Pending++
			continue
		}
		counted, prefers := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
		reported, conflict, delegated := r.Resolver, false, false
		countsPD := pdClient(m, prev, d.PDClient, r.Node)
		for _, l := range r.Digest.Links {
			if !r.Resolver && !m.Follows(l.Name) {
				continue
			}
			if d.PDClient != "" {
				handover.note(r.Node == d.PDClient, l.Prefixes, prevCurrent)
			}
			reported = true
			conflict = conflict || l.Conflict
			for _, p := range l.Prefixes {
				p.Sources &^= digest.SourceOffer // a confirmer's word, never a vote
				if d.PDClient != "" && p.Prefix != prevCurrent && !d.Confirm.confirms(p.Prefix) && !(p.Deprecated && draining[p.Prefix]) {
					// The client's word alone: a change needs the
					// confirmer's offer alike (confirm.go).
					p.Sources &^= digest.SourcePD
				}
				if !countsPD || !r.Resolver && !m.Counts(l.Name, digest.SourcePD) {
					// Not the client's word, or no delegation this
					// DynamicPrefix follows here: a node calling its
					// prefix delegated claims no exception from the
					// majority.
					p.Sources &^= digest.SourcePD
				}
				if !r.Resolver && !m.Counts(l.Name, digest.SourceRA) {
					p.Sources &^= digest.SourceRA | digest.SourceAddr
				}
				if !r.Resolver && (p.Sources == 0 || !m.Counts(l.Name, p.Sources)) {
					continue // another acquisition's prefix on the same link
				}
				delegated = delegated || !r.Resolver && p.Sources&digest.SourcePD != 0
				if why := m.Accept(p.Prefix); why != "" {
					if !p.Deprecated && !counted[p.Prefix] {
						if rejected[p.Prefix] == nil {
							rejected[p.Prefix] = &Rejected{Prefix: p.Prefix, Reason: why}
						}
						rejected[p.Prefix].Nodes++
						counted[p.Prefix] = true
					}
					continue
				}
				t := seen[p.Prefix]
				if t == nil {
					t = &tally{}
					seen[p.Prefix] = t
				}
				if counted[p.Prefix] {
					continue
				}
				counted[p.Prefix] = true
				t.seen++
				t.ra = t.ra || !r.Resolver && p.Sources&digest.SourceRA != 0
				t.pd = t.pd || !r.Resolver && p.Sources&digest.SourcePD != 0
				t.dns = t.dns || r.Resolver
				if p.Deprecated {
					t.remaining = append(t.remaining, p.Remaining)
				} else {
					t.votes++
					prefers[p.Prefix] = true
				}
			}
		}
		if reported {
			d.Reporting++
		}
		if len(prefers) > 0 {
			ballots = append(ballots, prefers)
		}
		if delegated {
			pdVoters++
		}
		if conflict {
			d.Conflicting = append(d.Conflicting, r.Node)
		}
	}
	slices.Sort(d.Conflicting)
	for _, p := range d.Confirm.Offered {
		// What the server offers the confirmer is no vote, but the
		// prefix is still reported (not Unreported) while it is offered.
		if seen[p] == nil {
			seen[p] = &tally{seen: 1, pd: true}
		}
	}
	for p, t := range seen {
		d.Votes[p] = t.votes
	}
	for _, r := range rejected {
		d.Rejected = append(d.Rejected, *r)
	}
	slices.SortFunc(d.Rejected, func(a, b Rejected) int { return digest.ComparePrefix(a.Prefix, b.Prefix) })

	// heldAgainst: a node prefers the current prefix and not p. One that
	// prefers both is indifferent between them and holds it against
	// nothing: counted as holding it, a liar voting for the current prefix
	// and for another moved the cluster on one honest node's word, where
	// voting for the other alone needs a majority (FuzzBallot).
	heldAgainst := func(p netip.Prefix) bool {
		return slices.ContainsFunc(ballots, func(b map[netip.Prefix]bool) bool { return b[prevCurrent] && !b[p] })
	}
	if t := seen[prevCurrent]; t != nil && t.votes >= max(m.Quorum, d.Reporting/2+1) {
		// A majority still prefers it: the node that tips a tie between two
		// prefixes the router offers does not move it.
		d.Current = prevCurrent
	} else {
		expected := d.Reporting
		if !prevCurrent.IsValid() {
			expected += d.Pending // the first adoption: not the first to report alone
		}
		var tied []netip.Prefix
		reported := seen[prevCurrent] != nil || handover.holds()
		d.Current, tied = choose(seen, prevCurrent, reported, lastReplaced(prev.History), func(p netip.Prefix) int {
			// Nothing current, or nobody prefers it to p: a majority of
			// the nodes expected to vote decides, never one node - but a
			// delegation is held where a DHCPv6 client runs, often on one
			// node (the agents' client runs on one), and that node's word
			// is the only one there is.
			if !heldAgainst(p) && !seen[p].pd {
				return max(m.Quorum, expected/2+1)
			}
			return m.Quorum
		})
		for _, p := range tied {
			d.Rejected = append(d.Rejected, Rejected{Prefix: p, Nodes: seen[p].votes, Reason: fmt.Sprintf(
				"it ties with %s, and nothing tells whose router replaced %s: %s holds until one leads (trustedRouters names the router)",
				joinPrefixes(slices.DeleteFunc(slices.Clone(tied), func(q netip.Prefix) bool { return q == p })), d.Current, d.Current)})
		}
		slices.SortFunc(d.Rejected, func(a, b Rejected) int { return digest.ComparePrefix(a.Prefix, b.Prefix) })
	}
	d.Changed = d.Current != prevCurrent
	prevValid, prevConfirmer := validLifetime(prev.DHCPv6PD) // stated for prevCurrent
	prevOther := otherOffered(prev, now)
	if m.DHCPv6PD && m.PDClient && m.PDTakenBy == "" {
		d.Confirm.stated(m, reports, prevCurrent, d.Current, prevValid, prevConfirmer, prevOther, now)
	}
	d.Unreported = d.Current.IsValid() && seen[d.Current] == nil && !(d.Current == prevCurrent && handover.holds())
	switch t := seen[d.Current]; {
	case !d.Current.IsValid():
	case t != nil && t.ra:
		d.Source = "router-advertisement"
	case t != nil && t.pd:
		d.Source = "dhcpv6-pd"
	case t != nil && t.dns:
		d.Source = "dns"
	case t != nil:
		d.Source = "static"
	default:
		d.Source = cmp.Or(prev.PrefixSource, "unknown")
	}
	var fallback time.Duration
	if m.DNS != nil {
		d.Dissent, fallback = dissent(reports, d.Current), m.DNS.MaxInterval
	}
	// What a prefix has left as its voters report it, and whether it ends
	// now. A delegation's voters are the nodes holding one; a name's
	// prefix ends by its deadline alone while a server names it.
	drain := func(p netip.Prefix) (time.Duration, bool) {
		switch t := seen[p]; {
		case t == nil:
			return 0, true
		case t.dns:
			return t.drain(0), false
		case t.pd && !t.ra:
			dr := t.drain(pdVoters)
			return dr, dr == 0
		default:
			dr := t.drain(d.Reporting)
			return dr, dr == 0
		}
	}
	left := func(p netip.Prefix) (time.Duration, bool) {
		dr, ends := drain(p)
		if p == prevCurrent && d.Current != prevCurrent && m.DHCPv6PD && m.PDClient && prevValid > 0 && !ends {
			// A delegation replaced now drains no longer than a
			// confirmer heard the server state for it while current,
			// whatever the client reports left of it: the client's
			// word alone (2^32-1 s, or no lifetime) kept it in the
			// pools for ever (issue 42, found by a red team). Counted
			// from when a confirmer was first offered another: a liar
			// client delaying its admission of the renumbering, or a
			// liar confirmer taking the client over late, would
			// otherwise add the delay to the server's word.
			from := now
			if !prevOther.IsZero() {
				from = prevOther
			}
			if dr = min(dr, prevValid-now.Sub(from)); dr <= 0 {
				return 0, true
			}
		}
		return dr, ends
	}
	d.History, d.Wake = history(m.MaxHistory, prev, prevCurrent, d.Current, left, now, fallback)
	if !d.Confirm.Since.IsZero() {
		// The roles rotate then. Past the bound with nobody new to name
		// (two eligible nodes), the pair and since stay: look again a bound
		// later, never at or before now (the writer would pass again at
		// once, for as long as they disagree).
		at := nextAfter(d.Confirm.Rotates(), now, ConfirmWithin)
		if d.Wake.IsZero() || at.Before(d.Wake) {
			d.Wake = at
		}
		if at := d.Confirm.StallsAt(); !at.IsZero() {
			d.PDStalled = !now.Before(at)
			if at.After(now) && at.Before(d.Wake) {
				d.Wake = at // the one pass that reports it
			}
		}
	}
	if at := d.Confirm.TrustsAt(); !at.IsZero() && (d.Wake.IsZero() || at.Before(d.Wake)) {
		d.Wake = at // the client's word counts alone then
	}
	d.Pooled = Pooled(d.History)
	d.Managed = slices.Clone(d.Pooled)
	for _, s := range append([]string{prev.CurrentPrefix}, historyPrefixes(prev.History)...) {
		if p, err := netip.ParsePrefix(s); err == nil && !slices.Contains(d.Managed, p.Masked()) {
			d.Managed = append(d.Managed, p.Masked())
		}
	}
	return d
}

// nextAfter is the first at + k*every (k >= 0) after now. In steps: now.Sub
// saturates at 292 years, and the since it counts from is the status's,
// which a stolen token may set in year 1 - one multiplication put the wake
// in year ~293, before now, and the writer passed again at once for as long
// as two nodes disagreed (red team r6b). Each step moves at by at least
// every, and by up to 292 years: a few dozen from year 1.
func nextAfter(at, now time.Time, every time.Duration) time.Time {
	for !at.After(now) {
		step := now.Sub(at) / every * every
		at = at.Add(max(step, every))
	}
	return at
}

// dissent lists the servers whose answer is not current, and why.
func dissent(reports []Report, current netip.Prefix) []string {
	var out []string
	for _, r := range reports {
		if !r.Resolver {
			continue
		}
		why := r.Problem
		if why == "" && !slices.ContainsFunc(r.Digest.Links, func(l digest.Link) bool {
			return slices.ContainsFunc(l.Prefixes, func(p digest.Prefix) bool { return p.Prefix == current && !p.Deprecated })
		}) {
			why = "answers another prefix"
		}
		if why != "" {
			out = append(out, r.Node+": "+why)
		}
	}
	return out
}

// PrefixAcquired is the condition type whose last transition the existing
// operator takes as the current prefix's acquiredAt (render.Status sets it).
const PrefixAcquired = "PrefixAcquired"

// clientNode picks the node to run the DHCPv6 client among the voting nodes
// whose agent follows the interface (and that spec.dhcpv6pd.nodeNames allows):
// the one running it now while it is Ready, so that it does not move without
// cause; else the first Ready one of nodeNames, else the first Ready one by
// name. A node gone NotReady hands the client over at once, while its digest
// still votes (for the grace), so the new client has the prefix back before
// the old report lapses: any node asks with the same identity, and the server
// hands back the same prefix. With no Ready candidate the client stays.
func clientNode(m model.Model, prev Status, reports []Report) string {
	ready, all := eligible(m, reports)
	current := ""
	if prev.DHCPv6PD != nil {
		current = prev.DHCPv6PD.ClientNode
	}
	for _, candidates := range [][]string{ready, all} {
		if slices.Contains(candidates, current) {
			return current
		}
		for _, n := range m.PDNodes {
			if slices.Contains(candidates, n) {
				return n
			}
		}
		if len(candidates) > 0 {
			return slices.Min(candidates)
		}
	}
	return ""
}

// pdClient reports whether node's delegated prefixes count: always in host
// mode (every node's own client); with the agents' client, only the client
// node's, and the previous client's during a handover.
// handover: while the DHCPv6 client moves to another node, that node holds
// no delegation yet (it solicits), and the status already names it, so the
// previous client's word no longer counts (pdClient): the current prefix would
// read as unreported for the second the new client takes to get it back.
// It is not, while the new client reports no delegation at all and another
// voting node still reports the current prefix delegated. Only the warning
// is spared: nothing counts as a vote here.
type handover struct {
	clientHolds bool // the client node reports a delegation
	othersHold  bool // another node reports the current prefix delegated
}

func (h *handover) note(client bool, ps []digest.Prefix, current netip.Prefix) {
	for _, p := range ps {
		if p.Sources&digest.SourcePD == 0 {
			continue
		}
		if client {
			h.clientHolds = true
		} else if p.Prefix == current && !p.Deprecated {
			h.othersHold = true
		}
	}
}

// holds reports whether the current prefix is reported through a handover.
func (h handover) holds() bool { return !h.clientHolds && h.othersHold }

func pdClient(m model.Model, prev Status, client, node string) bool {
	if !m.PDClient {
		return true
	}
	if m.PDTakenBy != "" {
		return false // the delegations there are another DynamicPrefix's
	}
	return node == client || (prev.DHCPv6PD != nil && node == prev.DHCPv6PD.ClientNode)
}

// choose applies the hysteresis rule. Among the most-voted prefixes the current
// one wins a tie, then the lowest; it must have the votes quorum asks of it.
// choose returns the prefix to follow: current while nothing else leads it
// with a quorum. When current has a prefix to follow, and two or more lead
// it alike (a second router on the link offers one beside the real router's
// renumbering, which no vote can tell apart), nothing moves: current is
// returned with the tied prefixes, to be reported. A current prefix no node
// reports (reported: preferred, deprecated while it drains, or offered to
// the confirmer) gives way to the prefix the status replaced last
// (replaced, newest first) that some node still reports: a stolen writer
// token named one the filter accepts, and the tie kept it current, and
// pooled, for as long as the two routers advertised (red team r6b); the
// replaced one is what the tie held, and the token's write is undone.
// Where none is, current holds, reported - never the lowest tied, which a
// host advertising 2000::/64 from its own address would take once the
// router's lifetime for current ran out. With nothing current the lowest
// is taken (a second router can be adopted then: docs/security.md).
func choose(seen map[netip.Prefix]*tally, current netip.Prefix, reported bool, replaced []netip.Prefix, quorum func(netip.Prefix) int) (netip.Prefix, []netip.Prefix) {
	votes := func(p netip.Prefix) int {
		if t := seen[p]; t != nil {
			return t.votes
		}
		return 0
	}
	prefixes := make([]netip.Prefix, 0, len(seen))
	for p := range seen {
		prefixes = append(prefixes, p)
	}
	slices.SortFunc(prefixes, digest.ComparePrefix)
	best := current
	for _, p := range prefixes {
		if votes(p) > votes(best) {
			best = p
		}
	}
	if best == current || votes(best) < quorum(best) {
		return current, nil
	}
	if current.IsValid() {
		var tied []netip.Prefix
		for _, p := range prefixes {
			if votes(p) == votes(best) {
				tied = append(tied, p)
			}
		}
		if len(tied) > 1 {
			// A tied prefix the status replaced (newest first) is one the
			// nodes elected before: it takes the tie back from a current
			// prefix a stolen writer token named (red team r7b: one the
			// nodes report only deprecated, or a minority prefers, was
			// held by the tie).
			for _, p := range replaced {
				if slices.Contains(tied, p) {
					return p, nil
				}
			}
			if !reported {
				// A current prefix no node reports holds no tie either (red
				// team r6b): the prefix the status replaced last that a
				// node still reports is the one the tie held before it.
				for _, p := range replaced {
					if seen[p] != nil {
						return p, tied
					}
				}
			}
			// Otherwise nothing moves: which tied prefix is whose router's
			// no vote tells, and taking the lowest is what a host
			// advertising 2000::/64 from its own address chooses - also
			// once the router's lifetime for current ran out.
			return current, tied
		}
	}
	return best, nil
}

// lastReplaced lists the prefixes history names replaced and not expired,
// the last replaced first.
func lastReplaced(h []HistoryEntry) []netip.Prefix {
	h = slices.DeleteFunc(slices.Clone(h), func(e HistoryEntry) bool {
		return e.State != model.StateDraining || e.DeprecatedAt.IsZero()
	})
	slices.SortStableFunc(h, func(a, b HistoryEntry) int { return b.DeprecatedAt.Compare(a.DeprecatedAt) })
	var out []netip.Prefix
	for _, e := range h {
		if p, err := netip.ParsePrefix(e.Prefix); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// joinPrefixes lists ps, comma-separated.
func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// currentPrefix is the current prefix st names, masked (the zero Prefix
// where it names none).
func currentPrefix(st Status) netip.Prefix {
	return entryPrefix(HistoryEntry{Prefix: st.CurrentPrefix})
}

// entryPrefix is the prefix h names, masked (the zero Prefix where it names
// none).
func entryPrefix(h HistoryEntry) netip.Prefix {
	p, err := netip.ParsePrefix(h.Prefix)
	if err != nil {
		return netip.Prefix{}
	}
	return p.Masked()
}

func historyPrefixes(h []HistoryEntry) []string {
	out := make([]string, 0, len(h))
	for _, e := range h {
		out = append(out, e.Prefix)
	}
	return out
}

// history renders status.history: the active entry, then earlier prefixes newest
// first (by deprecatedAt: the existing operator lists them oldest first), each
// draining until it expires, at most maxPrefixHistory of them. Timestamps
// already written are kept, the existing operator's too: a current prefix it
// recorded without a history entry was acquired when its PrefixAcquired
// condition last turned (where that operator itself takes acquiredAt from).
//
// With a fallback drain (a DNS name is followed: its maxInterval), a
// replaced prefix drains for at least that long (longer when the answers
// that named it had a longer TTL: caches may give it out that long), until
// its deadline alone - a server's memory of it does not outlive a new leader.
func history(maxHistory int, st Status, prevCurrent, current netip.Prefix, left func(netip.Prefix) (time.Duration, bool), now time.Time, fallback time.Duration) ([]HistoryEntry, time.Time) {
	stamp := now.Truncate(time.Second)
	prev := slices.Clone(st.History)
	rank := func(h HistoryEntry) int {
		switch {
		case h.State == model.StateActive:
			return 0
		case !h.DeprecatedAt.IsZero():
			return 1
		}
		return 2
	}
	slices.SortStableFunc(prev, func(a, b HistoryEntry) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 || rank(a) != 1 {
			return c
		}
		return b.DeprecatedAt.Compare(a.DeprecatedAt)
	})
	// Entries are keyed by the prefix they name, parsed and masked, and
	// written back in netip's text: matched by text, a current prefix a
	// stolen token renamed (2001:db8:1:0::/64, with an active entry of its
	// own) read as replaced by itself - a new entry, and the token's
	// drained from now, which renumber-writer-status refuses, pass after
	// pass (red team r7b).
	// The acquisition time of a current prefix without an entry (the existing
	// operator writes none).
	if prevCurrent.IsValid() && !slices.ContainsFunc(prev, func(h HistoryEntry) bool { return entryPrefix(h) == prevCurrent }) {
		prev = slices.Insert(prev, 0, HistoryEntry{Prefix: prevCurrent.String(), AcquiredAt: st.acquired(), State: model.StateActive})
	}
	var out []HistoryEntry
	byPrefix := map[netip.Prefix]HistoryEntry{}
	var order []netip.Prefix
	for _, h := range prev {
		key := entryPrefix(h)
		if _, dup := byPrefix[key]; dup || !key.IsValid() {
			continue
		}
		h.Prefix = key.String()
		byPrefix[key] = h
		order = append(order, key)
		if h.State == model.StateActive && key != current && h.AcquiredAt.After(stamp) {
			// The transition is stamped no earlier than the entry it
			// replaces was acquired (renumber-writer-status admits no
			// earlier deprecatedAt, and the new entry's acquiredAt is
			// the same time): a leader whose clock is behind the last
			// one's, or a stolen token's acquiredAt in the future,
			// would otherwise have every status write refused.
			stamp = h.AcquiredAt
		}
	}
	if current.IsValid() {
		h, ok := byPrefix[current]
		if !ok || current != prevCurrent || h.State != model.StateActive {
			h = HistoryEntry{Prefix: current.String(), AcquiredAt: stamp, State: model.StateActive}
		} else if h.AcquiredAt.IsZero() {
			h.AcquiredAt = stamp
		}
		out = append(out, h)
	}
	var wake time.Time
	kept := 0
	for _, p := range order {
		if p == current {
			continue
		}
		h := byPrefix[p]
		if h.State == model.StateActive {
			// Replaced just now: drain, with a deadline frozen at this transition.
			h.State, h.DeprecatedAt, h.ExpiresAt = model.StateDraining, stamp, time.Time{}
			dr, _ := left(p)
			if drain := max(fallback, dr); drain > 0 && drain != unbounded {
				h.ExpiresAt = now.Add(drain).Truncate(time.Second)
			}
		}
		if h.State != model.StateDraining {
			// Expired, or a state the writer never writes: the CRD does
			// not require one, and a stolen token's entry without it
			// would otherwise never expire - pooled for ever, and written
			// back as "", which the CRD's enum refuses (issue 42).
			h.State = model.StateExpired
		}
		if h.State == model.StateDraining && fallback > 0 {
			h.ExpiresAt = drainBound(h, fallback, now)
		}
		if h.State == model.StateDraining {
			// Unreported (by a majority) ends a drain, unless the name's
			// deadline does (an entry from before the name was followed
			// has none: it ends).
			_, silent := left(p)
			gone := silent && (fallback == 0 || h.ExpiresAt.IsZero())
			passed := !h.ExpiresAt.IsZero() && !now.Before(h.ExpiresAt)
			if gone || passed {
				h.State = model.StateExpired
			} else if !h.ExpiresAt.IsZero() && (wake.IsZero() || h.ExpiresAt.Before(wake)) {
				wake = h.ExpiresAt
			}
		}
		if kept >= maxHistory {
			break
		}
		kept++
		out = append(out, h)
	}
	return out, wake
}

// MaxTTL is the longest TTL a resolver's answer is read as (RFC 8767's
// seven days; resolve.MaxTTL, which imports this package): no answer makes
// a replaced prefix drain longer than max(maxInterval, MaxTTL).
const MaxTTL = 7 * 24 * time.Hour

// drainBound is a followed name's drain deadline as the writer can justify
// it: the status's, but no later than max(maxInterval, MaxTTL) after the
// prefix was replaced - the longest drain the writer itself sets. The
// status is the writer's only memory, and a stolen token writes it: a
// deadline it forged (expiresAt 9999) would otherwise keep a prefix no
// server names in the pools for as long as it says, after the token is
// revoked (issue 42, found by a red team). A deprecatedAt in the future is
// forged too, and counts as now: the bound then runs from the first
// decision that reads it, and is written back.
func drainBound(h HistoryEntry, maxInterval time.Duration, now time.Time) time.Time {
	if h.ExpiresAt.IsZero() {
		return h.ExpiresAt
	}
	from := h.DeprecatedAt
	if from.IsZero() || from.After(now) {
		from = now.Truncate(time.Second)
	}
	// Rounded up to a second: the writer's own deadline,
	// now.Add(drain).Truncate(time.Second), can pass deprecatedAt (now,
	// truncated) plus the drain by that fraction, and is kept as written.
	longest := (max(maxInterval, MaxTTL) + time.Second - 1).Truncate(time.Second)
	if bound := from.Add(longest); h.ExpiresAt.After(bound) {
		return bound
	}
	return h.ExpiresAt
}

// String summarises the decision for logs and events.
func (d Decision) String() string {
	return fmt.Sprintf("current %v (%d votes of %d nodes), pooled %v", d.Current, d.Votes[d.Current], d.Reporting, d.Pooled)
}
