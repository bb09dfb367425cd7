// Memory: what the agent believed of the routers, kept on the node across a
// restart (not in the digest: the ends move on every RA, and the digest
// would churn). The digest says only preferred or deprecated, and the
// kernel's addresses take any RA's word, so without it a restarted agent
// cannot hold the router's stated state under contradiction as a running
// agent does (docs/security.md, "An agent restart").
//
// Rules:
//   - Memory(now) is each watched link's believed words: router, prefix,
//     the absolute preferred and valid ends the router stated, and whether
//     the offer was re-sent alike, doubted or omitted.
//   - Remember(m, now) puts them back as believed words, ends as stored:
//     what an agent that never restarted would hold - except that none is
//     re-sent alike: the restart is a gap, as a reopened socket's is
//     (reads.go), and the router may have changed its offer in it, so its
//     first restatement is put to it again rather than refreshing the
//     word; none is preferred that the digest published last carried
//     deprecated (the file may be older than the digest: writes that
//     failed, a rollback and forward); and a doubted one is preferred no
//     longer than ConflictBound past the restart (a bound set to end a
//     stall takes a restart to apply). Words of routers the link does not
//     trust now, entries whose valid end passed, links not watched, and
//     entries past the RA table's cap are dropped; a prefix remembered is
//     vouched for by an RA, so the kernel's addresses never make it
//     preferred (seedCap does not apply).
//   - A link's memory carries the link's own link-layer address
//     (SetHardware), and is not put back on a link whose address differs:
//     the name is the key, and interfaces renamed across a reboot would
//     apply one link's routers to another.
//   - Memory.Moved reports whether a memory differs from the one last
//     written enough to write it again: the set of words or a flag
//     changed, an end came earlier at all, or later by more than quantum.
//     A stored end is never later than the router's by more than quantum,
//     and never earlier than the router's word ended it.

package observe

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// MemoryQuantum is how far later an end may move before the memory is
// written again (Moved): a router re-sending its lifetimes every few
// seconds moves them on every RA.
const MemoryQuantum = time.Minute

// Memory is what the agent believed of the routers on its links at At.
type Memory struct {
	At    time.Time    `json:"at"`
	Links []LinkMemory `json:"links"`
}

// LinkMemory is one link's believed words.
type LinkMemory struct {
	Name string `json:"name"`
	// Hardware: the link's own link-layer address when written
	// (SetHardware). The name is the key, and names may move between
	// interfaces across a reboot: a memory of another interface is not put
	// back (Another).
	Hardware string `json:"hardware,omitempty"`
	// Contradicted: a word contradicted another here (seedCap).
	Contradicted bool         `json:"contradicted,omitempty"`
	Words        []Remembered `json:"words"`
}

// Remembered is one router's believed word on one prefix. A zero end is
// never (an infinite lifetime).
type Remembered struct {
	Router    netip.Addr   `json:"router"`
	Prefix    netip.Prefix `json:"prefix"`
	Since     time.Time    `json:"since"` // the router first heard
	Valid     time.Time    `json:"valid,omitzero"`
	Preferred time.Time    `json:"preferred,omitzero"`
	// StatedValid, StatedPreferred: the lifetimes the believed word stated,
	// heard at Heard (a re-send is compared to them).
	StatedValid     time.Duration `json:"statedValid"`
	StatedPreferred time.Duration `json:"statedPreferred"`
	Heard           time.Time     `json:"heard"`
	Alike           bool          `json:"alike,omitempty"`
	Doubted         bool          `json:"doubted,omitempty"`
	Omitted         bool          `json:"omitted,omitempty"`
}

// Memory returns what the State believes of the routers at now, sorted.
func (s *State) Memory(now time.Time) Memory {
	m := Memory{At: now}
	for _, name := range s.Links() {
		l := s.links[name]
		lm := LinkMemory{Name: name, Hardware: l.hardware, Contradicted: l.contradicted}
		for k, e := range l.ra {
			if e.valid.passed(now) {
				continue
			}
			lm.Words = append(lm.Words, Remembered{
				Router: k.router, Prefix: k.prefix, Since: l.since[k.router],
				Valid: time.Time(e.valid), Preferred: time.Time(e.preferred),
				StatedValid: e.stated.valid, StatedPreferred: e.stated.preferred, Heard: e.at,
				Alike: e.alike, Doubted: e.doubted, Omitted: e.omitted,
			})
		}
		slices.SortFunc(lm.Words, compareRemembered)
		m.Links = append(m.Links, lm)
	}
	return m
}

func compareRemembered(a, b Remembered) int {
	return cmp.Or(a.Router.Compare(b.Router), a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
}

// Remember restores m's believed words on the links watched at now, and
// returns how many it restored. Call it after SetPolicies and Seed, before
// any event: it restores no word of a router the link does not trust, and
// none preferred that the seed carried deprecated.
func (s *State) Remember(m Memory, now time.Time) int {
	n := 0
	for _, lm := range m.Links {
		l := s.links[lm.Name]
		if l == nil || lm.Another(l.hardware) {
			continue
		}
		l.contradicted = l.contradicted || lm.Contradicted
		pol := s.policies[lm.Name]
		// What the digest carried deprecated, taken before the loop: a
		// word restored deletes the prefix's seed, and a second router's
		// word of it must see it too.
		deprecated := map[netip.Prefix]bool{}
		for p, c := range l.seeded {
			deprecated[p] = c.deprecated
		}
		for _, r := range lm.Words {
			valid := deadline(r.Valid)
			if !r.Router.IsValid() || !r.Prefix.IsValid() || r.Prefix != r.Prefix.Masked() || r.StatedValid <= 0 ||
				valid.passed(now) || len(l.ra) >= maxRAEntries {
				continue
			}
			if !pol.Trusts(r.Router) {
				continue // no longer trusted (trustedRouters changed while the agent was down)
			}
			if _, ok := l.since[r.Router]; !ok && len(l.since) < maxRouters && !r.Since.IsZero() {
				l.since[r.Router] = r.Since
			}
			preferred := deadline(r.Preferred)
			if deprecated[r.Prefix] && !preferred.passed(now) {
				// The digest published last carried it deprecated: a
				// memory older than it (writes that failed, a rollback
				// and forward, a run without --state-dir) must not put
				// back what the router withdrew since. A newer one that
				// says preferred was unpublished: the router's next
				// statement is put to it, as any change.
				preferred = deadline(now)
			}
			if r.Doubted && s.ConflictBound > 0 && !preferred.passed(now) {
				// doubt caps an offer once, as it is first doubted: a
				// bound set since (a flag, so a restart) applies to the
				// stall it was set for from the restart on.
				preferred = earlier(preferred, deadline(now.Add(s.ConflictBound)))
			}
			l.ra[raKey{r.Prefix, r.Router}] = lifetimes{
				valid: valid, preferred: preferred,
				stated: statement{valid: r.StatedValid, preferred: r.StatedPreferred}, at: r.Heard,
				// Never alike: the restart is a gap (reads.go forget), and
				// the router may have changed its offer in it; a replay of
				// its old word refreshed the remembered one past what the
				// router last stated (FuzzCorroboration 0dc2b77599129ede).
				// Its first restatement is put to it again.
				doubted: r.Doubted, omitted: r.Omitted,
			}
			// The router's word vouches for it again: the kernel's
			// addresses count, never preferred past that word.
			l.vouched[r.Prefix] = vouchRA
			delete(l.seeded, r.Prefix)
			n++
		}
	}
	return n
}

// Another reports whether lm was written of another interface than the
// one whose link-layer address is hardware now (a name that moved across
// a reboot). Either unknown (a link with none, a memory written before it
// was kept): not another.
func (lm LinkMemory) Another(hardware string) bool {
	return lm.Hardware != "" && hardware != "" && lm.Hardware != hardware
}

// Moved reports whether m differs from last enough to be written again
// (quantum: how far later an end may move unwritten).
func (m Memory) Moved(last Memory, quantum time.Duration) bool {
	if len(m.Links) != len(last.Links) {
		return true
	}
	for i, l := range m.Links {
		o := last.Links[i]
		if l.Name != o.Name || l.Hardware != o.Hardware || l.Contradicted != o.Contradicted || len(l.Words) != len(o.Words) {
			return true
		}
		for j, w := range l.Words {
			ow := o.Words[j]
			if w.Router != ow.Router || w.Prefix != ow.Prefix || !w.Since.Equal(ow.Since) ||
				w.StatedValid != ow.StatedValid || w.StatedPreferred != ow.StatedPreferred ||
				w.Alike != ow.Alike || w.Doubted != ow.Doubted || w.Omitted != ow.Omitted ||
				endMoved(w.Valid, ow.Valid, quantum) || endMoved(w.Preferred, ow.Preferred, quantum) {
				return true
			}
		}
	}
	return false
}

// endMoved: an end now that is earlier than the one written at all, or
// later by more than quantum (zero is never).
func endMoved(now, written time.Time, quantum time.Duration) bool {
	switch {
	case now.IsZero() || written.IsZero():
		return now.IsZero() != written.IsZero()
	case now.Before(written):
		return true
	default:
		return now.Sub(written) > quantum
	}
}
