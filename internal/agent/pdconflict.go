package agent

import (
	"time"

	"github.com/renumber/renumber/internal/digest"
)

// DelegationConflict is the handler for the DHCPv6 client on link hearing
// answers under one server's DUID contradict each other (another host
// answers as the server), or servers under different DUIDs offer
// delegations (two speakers it cannot tell apart); it believed neither. The
// client's log names the DUIDs. The link is reported
// in conflict, as for RAs from one router address that disagree, until
// ConflictHold passes without another. Safe from any goroutine.
func (a *Agent) DelegationConflict(link string, at time.Time) {
	a.events <- func() { a.pdConflicts[link] = at }
}

// DelegationImpersonated is the handler for the DHCPv6 client's node hearing
// a client message under the client's DUID that the client did not send (a
// Release, a Request for another prefix: dhcp6.Watch): another host speaks
// to the server as the client. Counted, and reported as a conflict on the
// link like contradicting answers. Safe from any goroutine.
func (a *Agent) DelegationImpersonated(link string, at time.Time) {
	metricPDImpersonations.With(link).Inc()
	a.DelegationConflict(link, at)
}

// ClientMessagesMissed is the handler for the DHCPv6 client's node's
// listener dropping n packets unread (dhcp6.Watch.Missed: a flood faster
// than it reads). Counted, not marked a conflict: it says a message may
// have gone unheard, not that one did (the server's NoBinding at the next
// Renew says that). Safe from any goroutine.
func (a *Agent) ClientMessagesMissed(link string, n int) {
	metricPDMissed.With(link).Add(uint64(n))
}

// DelegationDropped is the handler for the DHCPv6 client on link told
// NoBinding by its server for a delegation it holds with valid lifetime
// left (dhcp6.Client.Dropped): the client never releases, so a Release in
// its name the node did not hear (unicast to the server, relayed from
// another link, to a group the link does not bring to this node, or lost
// in a flood) is suspected. Counted, and reported as a conflict on the link like an
// impersonation heard. The client follows the server all the same: the
// report holds nothing back. Safe from any goroutine.
func (a *Agent) DelegationDropped(link string, at time.Time) {
	metricPDDropped.With(link).Inc()
	a.DelegationConflict(link, at)
}

// markDelegationConflicts sets Conflict on the links whose DHCPv6 client
// heard a contradiction within ConflictHold of now, journals the changes,
// keeps the metric, and returns when the earliest mark lapses (zero: none).
func (a *Agent) markDelegationConflicts(node *digest.Node, now time.Time) time.Time {
	var next time.Time
	for link, at := range a.pdConflicts {
		until := at.Add(a.state.ConflictHold)
		if !now.Before(until) {
			delete(a.pdConflicts, link)
			a.log.Info(link + ": DHCPv6 answers agree again")
			metricPDConflict.With(link).Set(0)
			continue
		}
		if next.IsZero() || until.Before(next) {
			next = until
		}
		if !a.pdConflicted[link] {
			a.log.Warn(link + ": DHCPv6 conflict (answers under one server's DUID, or from two servers, disagree; or a host speaks to the server as the client, or the server dropped a binding the client holds: see the client's log); holding the delegation as it was")
		}
		a.pdConflicted[link] = true
		metricPDConflict.With(link).Set(1)
		for i := range node.Links {
			if node.Links[i].Name == link {
				node.Links[i].Conflict = true
			}
		}
	}
	for link := range a.pdConflicted {
		if _, ok := a.pdConflicts[link]; !ok {
			delete(a.pdConflicted, link)
		}
	}
	return next
}
