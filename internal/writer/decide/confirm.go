// The confirmation rule for the agents' own DHCPv6 client (issue 42, "one
// node"): the client runs on one node, and whatever that node's digest says
// it holds would otherwise be the cluster's prefix. A second node, the
// confirmer, solicits with the same identity (the DUID and IAID come from
// the DynamicPrefix, not the node) and never requests: the server offers the
// binding it has without committing anything, and the confirmer reports the
// offer (digest.SourceOffer). A delegation counts only while the confirmer
// offers it alike.
//
//   - Agreement: the client's preferred delegations on the PD interface are
//     the confirmer's preferred offers there. While they differ nothing the
//     client says counts; the status names what the client claimed when
//     they began to differ (dhcpv6pd.unconfirmed: the confirmer solicits
//     again when it is set) and since when (dhcpv6pd.since), once per
//     episode: a claim changing within it writes nothing (the claims go to
//     the log).
//   - A disagreement is bounded (ConfirmWithin): past it, a confirmer that
//     offers nothing is replaced by the next eligible node; one that offers
//     another delegation takes over the client (it requests, and the server
//     answers whoever asks with the identity), and the next node confirms -
//     not on an offer older than the client's claim (backing.go).
//     A lying node in either role costs one bound each time the rotation
//     reaches it; with three eligible nodes or more the rotation reaches two
//     honest ones, who agree. With two, a liar stalls the delegation (the
//     current prefix holds), reported, and nothing it says is adopted.
//   - A replaced delegation: nothing confirms it (the server offers only
//     the binding it has now), so the client's word that it is deprecated
//     counts, up to the deadline frozen at the renumbering - capped by the
//     shortest valid lifetime a confirmer heard the server state for it
//     while it was current (dhcpv6pd.validLifetime; the client's word
//     alone kept it for ever), counted from the first pass a confirmer was
//     offered another delegation (dhcpv6pd.otherOffered): the server had
//     stopped stating it by then, however late the renumbering lands.
//   - Trusted after a bound the user sets (spec.dhcpv6pd.trustClientAfter;
//     none by default): once the client has held a delegation other than
//     the current prefix, unconfirmed, that long - through every rotation,
//     while it stays the client - its word counts alone, until a confirmer
//     agrees or another node is the client. Nothing else ends a stall no
//     rotation settles (two eligible nodes disagreeing; a LAN host
//     contradicting every confirmer's Solicit, so that none is offered
//     anything); the price is the confirmation's: a liar client whose
//     confirmers are kept from confirming wins once the bound passes.
//   - No confirmer: spec.dhcpv6pd.nodeNames names exactly one node (the
//     admin trusts it), or nodeNames is empty, one node is eligible and
//     none ever confirmed, and no agent is awaited (nobody to confirm). The client's word counts alone,
//     and the condition says so. Once a confirmer was named, the others
//     going NotReady or away stalls changes (reported) instead: an outage
//     must not leave a liar's word alone; naming the remaining node in
//     nodeNames trusts it.
//
// The agreement rule needs no I/O: the status carries the roles and the
// time the disagreement began, written only when they change.

package decide

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
)

// ConfirmWithin is how long a client and a confirmer may disagree before the
// roles rotate: longer than the confirmer takes to solicit once it is named
// or asked (seconds), and than an honest client takes to renew after the
// confirmer saw a renumbering first, for leases whose T1 is under it;
// beyond that the rotation makes the renumbering land.
var ConfirmWithin = 2 * time.Minute

// Confirmation is the confirmation rule's outcome for one pass.
type Confirmation struct {
	// Confirmer is the node named to confirm ("": none).
	Confirmer string
	// Solo says why nobody confirms ("": somebody does): the client's word
	// counts alone.
	Solo string
	// Held: what the client reports holding (preferred, on the PD
	// interface); Offered: what the confirmer reports offered.
	Held, Offered []netip.Prefix
	// Agree: Held and Offered are the same (a delegation in them counts).
	Agree bool
	// Since is when the current disagreement began (zero: they agree).
	Since time.Time
	// Alone: no eligible node but the client and the confirmer is Ready,
	// so a disagreement does not rotate (two nodes: nothing tells the
	// liar from the honest one, the pair stays, reported).
	Alone bool
	// kept is the client the status keeps naming while no node is eligible.
	kept string
	// unconfirmed is what the client claimed when the disagreement began
	// (status.dhcpv6pd.unconfirmed: the confirmer solicits when it is set).
	unconfirmed string
	// backing is what the confirmer replaced at the last rotation of this
	// disagreement was offered (status.dhcpv6pd.backing), against what the
	// client held then (backedAgainst), kept (no claim makes it stale) when
	// the bound before went stale (backing.go).
	backing, backedAgainst string
	backingKept            bool
	// valid is the shortest finite valid lifetime a confirmer heard the
	// server state for the current prefix since it became current
	// (status.dhcpv6pd.validLifetime; zero: none heard).
	valid time.Duration
	// otherOffered is when a confirmer was first offered a delegation
	// other than the current prefix while it stayed current
	// (status.dhcpv6pd.otherOffered; zero: not since it became current).
	otherOffered time.Time
	// Trusted is when the client's unconfirmed word began to count alone
	// under spec.dhcpv6pd.trustClientAfter (zero: it does not).
	Trusted time.Time
	// unconfirmedSince is since when the client has held, unconfirmed, a
	// delegation other than the current prefix (status.dhcpv6pd.
	// unconfirmedSince; kept only with trustClientAfter set), and trustsAt
	// when that passes the bound (zero: trusted already, or nothing
	// waits).
	unconfirmedSince, trustsAt time.Time
}

// Rotates is when the disagreement that began at Since outlives
// ConfirmWithin and another node confirms (meaningless while they agree).
func (c Confirmation) Rotates() time.Time { return c.Since.Add(ConfirmWithin) }

// StallsAt is when a disagreement with nobody to rotate to (Alone) has
// outlasted the valid lifetime the server stated for the current prefix
// (status.dhcpv6pd.validLifetime, at least ConfirmWithin): nothing moves (a
// client's word against a confirmer's, one of them lying), so the stall is
// made loud then - Degraded, and a Warning - rather than left quiet for
// ever. An honest client renews within that lifetime, so an honest
// renumbering seen first by the confirmer is never reported. Zero: no such
// disagreement, or no finite lifetime heard (nothing bounds it: an honest
// client's T1 may be anything, and a Degraded there would be a false
// alarm; DelegationConfirmed still says what only the user can do).
func (c Confirmation) StallsAt() time.Time {
	if !c.Alone || c.Agree || c.Solo != "" || !c.Trusted.IsZero() || c.Since.IsZero() || c.valid == 0 {
		return time.Time{}
	}
	return c.Since.Add(max(c.valid, ConfirmWithin))
}

// Disagrees says the client holds a delegation and the confirmer is offered
// another: one of the two is wrong (a forged digest, or a renumbering one of
// them has not seen yet), as opposed to one of them having nothing yet.
func (c Confirmation) Disagrees() bool {
	return c.Solo == "" && !c.Agree && len(c.Offered) > 0 && len(c.Held) > 0
}

// Status is the dhcpv6pd status for client and this confirmation.
func (c Confirmation) Status(client string) *dynamicprefix.DHCPv6PDStatus {
	client = cmp.Or(client, c.kept)
	if client == "" && c.Confirmer == "" {
		return nil
	}
	st := &dynamicprefix.DHCPv6PDStatus{ClientNode: client, ConfirmerNode: c.Confirmer}
	if !c.Since.IsZero() {
		st.Unconfirmed = c.unconfirmed
		st.Since = c.Since.UTC().Format(time.RFC3339)
	}
	st.Backing = c.backing
	if c.backing != "" {
		st.BackedAgainst, st.BackingKept = c.backedAgainst, c.backingKept
	}
	st.ValidLifetime = int64(c.valid / time.Second)
	if !c.otherOffered.IsZero() {
		st.OtherOffered = c.otherOffered.UTC().Format(time.RFC3339)
	}
	if !c.unconfirmedSince.IsZero() {
		st.UnconfirmedSince = c.unconfirmedSince.UTC().Format(time.RFC3339)
	}
	return st
}

// TrustsAt is when the client's unconfirmed word will count alone
// (spec.dhcpv6pd.trustClientAfter) unless something changes first (zero:
// nothing waits for it).
func (c Confirmation) TrustsAt() time.Time { return c.trustsAt }

// trustAfter is how long m's client must go unconfirmed before its word
// counts alone: spec.dhcpv6pd.trustClientAfter, but never before the
// rotation has had its turn - a liar client with no accomplice is taken
// over within two ConfirmWithin (the second takeover clause in roles), and
// one more leaves room for confirmers slow to solicit. A bound no longer
// than ConfirmWithin trusted such a liar first, its forgery current and the
// server's prefix out of the pools until the rotation replaced it (found by
// a red team: 1m under the default 2m, 63 s in the world).
func trustAfter(m model.Model) time.Duration {
	if m.PDTrustAfter <= 0 {
		return 0
	}
	return max(m.PDTrustAfter, 3*ConfirmWithin)
}

// trust applies spec.dhcpv6pd.trustClientAfter to the confirmation c of
// client's word: an episode begins when the client holds, unconfirmed, a
// delegation other than current, and lasts while the same node is the
// client and no confirmer agrees - kept in the status (was), across
// rotations of the confirmer, which reset Since. Past the bound the
// client's word counts alone for the rest of the episode: the renumbering
// it landed, and any it holds later (a liar could have claimed its last
// one from the start; and an episode that ended when the prefix landed
// would be one more status write, and a stall begun again). A node
// flapping its claim writes nothing.
func (c *Confirmation) trust(m model.Model, was dynamicprefix.DHCPv6PDStatus, reports []Report, client string, current netip.Prefix, now time.Time) {
	if m.PDTrustAfter <= 0 || c.Solo != "" || client == "" || c.Agree {
		return
	}
	if t, err := time.Parse(time.RFC3339, was.UnconfirmedSince); err == nil && client == was.ClientNode && !t.After(now) {
		c.unconfirmedSince = t
	} else if slices.ContainsFunc(c.Held, func(p netip.Prefix) bool { return p != current }) {
		c.unconfirmedSince = now.Truncate(time.Second)
	} else {
		return
	}
	// The anchor is kept as written (a new leader reads it there), but
	// counts from no earlier than this writer first saw the client's
	// digest as it is: a stolen token's unconfirmedSince of 2000 trusted
	// the client at once. An honest anchor loses the time before this
	// writer's term, or before the client's digest last changed - a later
	// trust, never an earlier one.
	from := c.unconfirmedSince
	if i := slices.IndexFunc(reports, func(r Report) bool { return r.Node == client }); i >= 0 && reports[i].Since.After(from) {
		from = reports[i].Since
	}
	if at := from.Add(trustAfter(m)); now.Before(at) {
		c.trustsAt = at
	} else {
		c.Trusted = at
	}
}

// stated keeps c.valid for current: what the status held while current
// stays (prevValid), lowered by what the confirmer is offered for it now
// (the one named, and the one the status named before: a rotation in this
// pass does not lose what the last one heard). What the client holds never
// enters it. The shortest, not the last: a liar named confirmer while the
// prefix is current, and client when it is replaced, cannot raise what an
// honest confirmer heard (it can lower it, ending the drain early, as the
// client's silence about it already can). An infinite lifetime bounds
// nothing and is left out.
//
// It keeps c.otherOffered likewise: what the status held while current
// stays, else the first pass a confirmer (either) is offered, or the client
// holds, preferred delegations none of which is current. The client's word
// too: a liar confirmer offering the current prefix for ever must not delay
// the anchor by the rotation that replaces it, and a liar client saying it
// early only ends the drain early, as its silence about it already can.
// Never cleared while current stays:
// a liar confirmer offered "another" early ends a later drain early, as a
// short lifetime it states already can; an honest confirmer offered current
// again cannot tell a stale word from a fresh one, and clearing would let a
// liar confirmer move the anchor late (offering current, then the backing).
func (c *Confirmation) stated(m model.Model, reports []Report, prevCurrent, current netip.Prefix, prevValid time.Duration, prevConfirmer string, prevOther, now time.Time) {
	c.valid, c.otherOffered = 0, time.Time{}
	if current == prevCurrent {
		c.valid, c.otherOffered = prevValid, prevOther
	}
	if c.Solo != "" || c.Confirmer == "" || !current.IsValid() {
		return
	}
	if c.otherOffered.IsZero() && len(c.Held) > 0 && !slices.Contains(c.Held, current) {
		c.otherOffered = now.Truncate(time.Second)
	}
	for _, r := range reports {
		if r.Node != c.Confirmer && r.Node != prevConfirmer || r.Resolver || r.Pending {
			continue
		}
		if offered := preferredOn(m, r, digest.SourceOffer); c.otherOffered.IsZero() && len(offered) > 0 && !slices.Contains(offered, current) {
			c.otherOffered = now.Truncate(time.Second)
		}
		for _, l := range r.Digest.Links {
			if l.Name != m.PDInterface {
				continue
			}
			for _, p := range l.Prefixes {
				if p.Prefix == current && p.Sources&digest.SourceOffer != 0 && !p.Deprecated &&
					p.Valid > 0 && p.Valid < digest.MaxLifetime*time.Second && (c.valid == 0 || p.Valid < c.valid) {
					c.valid = p.Valid
				}
			}
		}
	}
}

// otherOffered is when the status says a confirmer was first offered
// another delegation than its current prefix (zero: never, unreadable, after
// now, or before the current prefix's entry was acquired - unless that is
// in the future, forged too, and bounds nothing). The writer sets
// it only while that prefix is current: an earlier one is a stolen token's,
// and with validLifetime it ended the next renumbering's drain at once.
func otherOffered(prev Status, now time.Time) time.Time {
	st := prev.DHCPv6PD
	if st == nil || st.OtherOffered == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, st.OtherOffered)
	if err != nil || t.After(now) {
		return time.Time{}
	}
	for _, h := range prev.History {
		if h.State == model.StateActive && h.Prefix == prev.CurrentPrefix && t.Before(h.AcquiredAt) && !h.AcquiredAt.After(now) {
			return time.Time{}
		}
	}
	return t
}

// validLifetime is what st states for its current prefix (zero: nothing,
// or a value out of range), and the confirmer it names.
func validLifetime(st *dynamicprefix.DHCPv6PDStatus) (time.Duration, string) {
	if st == nil {
		return 0, ""
	}
	if st.ValidLifetime <= 0 || st.ValidLifetime >= digest.MaxLifetime {
		return 0, st.ConfirmerNode
	}
	return time.Duration(st.ValidLifetime) * time.Second, st.ConfirmerNode
}

// confirm names the client and the confirmer and judges their agreement:
// the client clientNode picks, unless a disagreement outlived ConfirmWithin;
// then whether the client's word counts alone past trustClientAfter.
func confirm(m model.Model, prev Status, reports []Report, now time.Time) (string, Confirmation) {
	client, c := roles(m, prev, reports, now)
	var was dynamicprefix.DHCPv6PDStatus
	if prev.DHCPv6PD != nil {
		was = *prev.DHCPv6PD
	}
	current := currentPrefix(prev)
	c.trust(m, was, reports, client, current, now)
	return client, c
}

// roles names the client and the confirmer and judges their agreement.
func roles(m model.Model, prev Status, reports []Report, now time.Time) (string, Confirmation) {
	client := clientNode(m, prev, reports)
	var c Confirmation
	var was dynamicprefix.DHCPv6PDStatus
	if prev.DHCPv6PD != nil {
		was = *prev.DHCPv6PD
	}
	ready, all := eligible(m, reports)
	switch {
	case client == "":
		// Nobody eligible votes: both names stay in the status, so that
		// the first node back does not count as the only one there is.
		c.Confirmer, c.kept = was.ConfirmerNode, was.ClientNode
		return "", c
	case len(m.PDNodes) == 1:
		c.Solo = "spec.acquisition.dhcpv6pd.nodeNames names " + client + " alone: its delegation counts unconfirmed"
		return client, c
	case len(m.PDNodes) == 0 && len(all) < 2 && was.ConfirmerNode == "" && !slices.ContainsFunc(reports, func(r Report) bool { return r.Pending }):
		// One node, and never a second: nobody to ask. A cluster that
		// had a confirmer does not fall back to one node's word when the
		// others stop voting (that is when a liar would be alone), and
		// neither does one still awaiting agents, nor one whose
		// nodeNames names others that do not vote (absent, or not yet
		// joined: the admin named more than one).
		c.Solo = "only " + client + " is eligible to run the DHCPv6 client: nobody confirms its delegation"
		return client, c
	}
	since, _ := time.Parse(time.RFC3339, was.Since)
	if since.After(now) {
		// Forged (a stolen token: the writer only ever writes a past
		// pass's time): believed, it held the rotation back for as long
		// as it said. Read as now, and written back so.
		since = now.Truncate(time.Second)
	}
	c.Confirmer = confirmerNode(m, client, was.ConfirmerNode, ready, all)
	if c.Confirmer == "" {
		// Nobody else votes: the node named stays named, absent, and
		// confirms nothing until another votes.
		for _, n := range []string{was.ConfirmerNode, was.ClientNode} {
			if n != client && c.Confirmer == "" {
				c.Confirmer = n
			}
		}
	}
	c.judge(m, reports, client)
	samePair := client == was.ClientNode && c.Confirmer == was.ConfirmerNode
	if samePair && (!c.Agree || len(c.Held) == 0) {
		// Kept until the pair agrees on a delegation (a confirmer just
		// named, which has not solicited yet, agrees with a silent
		// client on nothing).
		c.backing, c.backedAgainst, c.backingKept = was.Backing, was.BackedAgainst, was.BackingKept
	}
	stale := staleBacking(was, c.Held)
	past := was.Since != "" && !now.Before(since.Add(ConfirmWithin))
	switch {
	case !samePair || c.Agree:
	case len(c.Offered) > 0 && slices.Contains(ready, c.Confirmer) && !stale && (joinPrefixes(c.Offered) == was.Backing || was.Backing != "" && past && joinPrefixes(c.Held) != was.Backing):
		// Two nodes besides the client, one after the other, were
		// offered the same delegation the client does not hold: the
		// confirmer takes the client over (it requests, and the server
		// answers whoever asks with the identity), and the next node
		// confirms. One node's offer alone never moves the client role:
		// a liar named confirmer would take it by offering anything,
		// and then, as client, hold the current prefix and never renew.
		// The next confirmer is not the client replaced (two nodes
		// contradicted it), unless nobody else is eligible.
		//
		// So does a second confirmer past its own bound offered another
		// delegation than the first: two nodes besides the client, each
		// for a bound, were offered what it does not hold - a server
		// whose binding moves faster than the rotation (a lifetime
		// shorter than the bound that nobody renews, each Solicit given
		// a fresh prefix) never offers two confirmers the same, and a
		// client holding nothing, or a forgery, kept the role for ever.
		// Not once the client holds the backing: the first confirmer
		// backed what it holds now (it renewed late), so only this
		// confirmer contradicts it - a liar reached by the rotation took
		// an honest client over so (found by a red team).
		//
		// Neither while the backing is stale (backing.go): the client
		// holds something else than it held when the backing was
		// recorded, so the server answered it after it answered the
		// backer, and a liar reached by the rotation echoing the stale
		// offer took an honest client holding the live binding over.
		others := func(ns []string) []string {
			return slices.DeleteFunc(slices.Clone(ns), func(n string) bool { return n == was.ClientNode })
		}
		client, c.Confirmer = c.Confirmer, was.ClientNode
		if n := confirmerNode(m, client, was.ConfirmerNode, others(ready), others(all)); n != "" {
			c.Confirmer = n
		}
		c.back("", "", false)
		c.judge(m, reports, client)
	case past:
		// Past the bound: the next node confirms, and what this
		// confirmer was offered waits for a second node to back it
		// (with two eligible nodes there is none: the pair stays,
		// reported).
		if n := after(client, c.Confirmer, ready); n != "" && n != c.Confirmer {
			offered := joinPrefixes(c.Offered)
			c.back(offered, was.Unconfirmed, stale && offered == was.Backing && slices.Contains(ready, c.Confirmer))
			c.Confirmer = n
			c.judge(m, reports, client)
			if !c.Agree && len(c.Offered) > 0 && joinPrefixes(c.Offered) == c.backing {
				// Already offered alike (its last probe): it takes
				// the client over on the next pass.
				c.Since, c.unconfirmed = since, cmp.Or(was.Unconfirmed, joinPrefixes(c.Held))
				return client, c
			}
		}
	}
	if n := after(client, c.Confirmer, ready); n == "" || n == c.Confirmer {
		c.Alone = true
	}
	if !c.Agree {
		c.Since, c.unconfirmed = now.Truncate(time.Second), joinPrefixes(c.Held)
		if client == was.ClientNode && c.Confirmer == was.ConfirmerNode && was.Since != "" {
			// The same two still disagree: a new claim restarts neither
			// the bound nor the confirmer's probe, and writes nothing (a
			// node flapping its digest would write the status, and poke
			// the confirmer, once per flap).
			c.Since, c.unconfirmed = since, cmp.Or(was.Unconfirmed, c.unconfirmed)
		}
	} else if len(c.Held) > 0 {
		c.back("", "", false)
	}
	return client, c
}

// judge fills Held, Offered and Agree from the reports of client and
// c.Confirmer.
func (c *Confirmation) judge(m model.Model, reports []Report, client string) {
	c.Held, c.Offered = nil, nil
	for _, r := range reports {
		switch r.Node {
		case client:
			c.Held = preferredOn(m, r, digest.SourcePD)
		case c.Confirmer:
			c.Offered = preferredOn(m, r, digest.SourceOffer)
		}
	}
	c.Agree = slices.Equal(c.Held, c.Offered)
}

// confirms reports whether node's delegation p counts under c.
func (c Confirmation) confirms(p netip.Prefix) bool {
	return c.Solo != "" || !c.Trusted.IsZero() || c.Agree && slices.Contains(c.Offered, p)
}

// preferredOn lists, sorted, the acceptable preferred prefixes r reports from
// src on the PD interface.
func preferredOn(m model.Model, r Report, src digest.Source) []netip.Prefix {
	var out []netip.Prefix
	for _, l := range r.Digest.Links {
		if l.Name != m.PDInterface {
			continue
		}
		for _, p := range l.Prefixes {
			if p.Sources&src != 0 && !p.Deprecated && m.Accept(p.Prefix) == "" {
				out = append(out, p.Prefix)
			}
		}
	}
	slices.SortFunc(out, digest.ComparePrefix)
	return slices.Compact(out)
}

// eligible lists the voting nodes that may run the client (or confirm):
// their agent follows the PD interface and nodeNames, when set, names them;
// ready are those Ready.
func eligible(m model.Model, reports []Report) (ready, all []string) {
	for _, r := range reports {
		if r.Resolver || r.Pending {
			continue
		}
		if slices.ContainsFunc(r.Digest.Links, func(l digest.Link) bool { return l.Name == m.PDInterface }) &&
			(len(m.PDNodes) == 0 || slices.Contains(m.PDNodes, r.Node)) {
			all = append(all, r.Node)
			if !r.NotReady {
				ready = append(ready, r.Node)
			}
		}
	}
	return ready, all
}

// confirmerNode keeps the confirmer named while it is Ready and eligible and
// not the client; else it takes the next Ready eligible node after it (by
// name, wrapping), or any eligible one when none is Ready.
func confirmerNode(m model.Model, client, current string, ready, all []string) string {
	for _, candidates := range [][]string{ready, all} {
		if current != client && slices.Contains(candidates, current) {
			return current
		}
		if n := after(client, current, candidates); n != "" {
			return n
		}
	}
	return ""
}

// after is the first of candidates after prev (by name, wrapping) that is
// not client ("": none; prev itself when it is the only one).
func after(client, prev string, candidates []string) string {
	sorted := slices.Sorted(slices.Values(candidates))
	for _, n := range sorted {
		if strings.Compare(n, prev) > 0 && n != client {
			return n
		}
	}
	for _, n := range sorted {
		if n != client {
			return n
		}
	}
	return ""
}
