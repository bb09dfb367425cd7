package decide

import (
	"net/netip"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// A backing (status.dhcpv6pd.backing) is one node's offer waiting for a
// second: a later confirmer offered it alike, or one offered another past
// its own bound, takes the client over. It is only as fresh as the offer:
// a confirmer was offered X while the client held nothing, the server moved
// on to Y and the client got Y; a liar reached by the rotation echoing X
// took the role from an honest client holding the server's live binding
// (FuzzBallot input b89af4ad46f279f5). So the backing records what the
// confirmer was asked to confirm (backedAgainst: the bound's unconfirmed,
// the client's first claim in the disagreement; the confirmer solicits
// again when it is set, so its answer is newer), and while the client
// holds anything else it is stale: the server answered the client after
// it answered the confirmer, and nothing the writer reads says the
// confirmer would still be offered the same. A stale backing takes nobody
// over. A client holding nothing has said nothing newer: that never makes
// a backing stale (a liar client holding nothing kept the role so once,
// see confirm).
//
// Staleness alone would let a liar client keep the role for ever by
// changing its claim after each probe. So at the end of a bound whose
// backing was stale, a Ready confirmer offered it alike (a second node,
// asked after the claim the backing was recorded against) makes it kept:
// no claim makes it stale, and the next node offered alike takes the
// client over - at the second rotation instead of the first
// (TestAFlappingLiarClientLosesTheRoleAtTheSecondRotation). Kept needs
// that second offer: an honest confirmer's offer at the end of its bound
// may be older than the client's latest claim (the server moved after it
// answered, and the client renewed), and a liar next in the rotation would
// echo it. Offered alike, an honest confirmer (named after the backing was
// recorded) was asked after the client's newer claim: had it been offered
// the backing while the client still held what the backing was recorded
// against, it would have taken the client over then. A liar confirmer
// whose echo is kept gains nothing: the rotation moves on to another node.
//
// Nothing here is written at rest: backedAgainst and backingKept change
// with the backing, at a rotation, a takeover or an agreement; staleness
// is read from the client's claim at each pass.

// staleBacking says whether the client's claim (held) is newer than the
// backing in was: it holds a delegation other than the one the backing was
// recorded against, and the backing was not kept.
func staleBacking(was dynamicprefix.DHCPv6PDStatus, held []netip.Prefix) bool {
	return was.Backing != "" && !was.BackingKept && len(held) > 0 && joinPrefixes(held) != was.BackedAgainst
}

// back records backing, the claim it was recorded against, and whether it
// is kept.
func (c *Confirmation) back(backing, against string, kept bool) {
	c.backing, c.backedAgainst, c.backingKept = backing, against, kept && backing != ""
	if backing == "" {
		c.backedAgainst = ""
	}
}
