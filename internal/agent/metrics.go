package agent

import "github.com/renumber/renumber/internal/metrics"

var (
	metricPrefixEvents = metrics.NewCounterVec("renumber_agent_prefix_events_total", "Prefix changes seen on watched links, by kind (appeared, deprecated, preferred again, gone).", "kind")
	metricRejected     = metrics.NewCounter("renumber_agent_prefixes_rejected_total", "Prefixes seen but not reported (filtered, or over the digest's bound).")
	metricIgnored      = metrics.NewCounterVec("renumber_agent_ras_ignored_total", "Router Advertisements not believed, by link and reason (untrusted: from a router no DynamicPrefix of the link trusts).", "link", "reason")

	metricContradictions   = metrics.NewCounterVec("renumber_agent_router_contradictions_total", "Router Advertisements that contradicted an earlier one from the same router address (a second speaker on the router's address), by link.", "link")
	metricCrowded          = metrics.NewCounterVec("renumber_agent_router_crowded_total", "Router Advertisements not considered because the link already remembers as many routers as it may, by link.", "link")
	metricConflict         = metrics.NewGaugeVec("renumber_agent_router_conflict", "Router addresses in conflict on the link now (RAs from one address that disagree about the prefixes); the last agreed prefixes hold.", "link")
	metricRAEntries        = metrics.NewGaugeVec("renumber_agent_ra_entries", "(prefix, router) lifetimes the link remembers from Router Advertisements it believed; capped, whatever the routers (a trusted router's address is as easy to take as any).", "link")
	metricAnswerMode       = metrics.NewGaugeVec("renumber_agent_router_answer_mode", "Router addresses on the link by how they answer a Router Solicitation, as the agent learnt it (unicast: corroborated within 0.5 s plus the margin; multicast or unknown: within 3.5 s of the router's last multicast RA plus the margin).", "link", "mode")
	metricReadLag          = metrics.NewGaugeVec("renumber_agent_ra_read_lag_seconds", "How long the oldest corroboration window that passed has waited for the RA listener to read up to its end (0: none waits); while it waits no change is believed.", "link")
	metricPDConflict       = metrics.NewGaugeVec("renumber_agent_dhcpv6_conflict", "1 while the link's DHCPv6 client hears answers under one server DUID that contradict each other (another host answers as the server), or a host speaking to the server as the client; the delegation holds as it was.", "link")
	metricPDImpersonations = metrics.NewCounterVec("renumber_agent_dhcpv6_impersonations_total", "Client messages heard on the link under the DHCPv6 client's DUID that the client did not send and that may move the server's binding (a Release or Decline, a Request/Renew/Rebind for another prefix, a Solicit with Rapid Commit; alone or in Relay-Forwards, to any group): another host speaks to the server as the client.", "link")
	metricMemoryWrites     = metrics.NewCounterVec("renumber_agent_memory_writes_total", "Writes of the agent's memory of the routers (--state-dir), by result (ok, failed): only when the routers' believed words, their flags or an end moved (an end later by more than a minute), not on every RA.", "result")
	metricPDDropped        = metrics.NewCounterVec("renumber_agent_dhcpv6_bindings_dropped_total", "NoBinding answers from the DHCPv6 server for a delegation the client holds with valid lifetime left: the client never releases, so a Release in its name that the node did not hear (unicast, relayed from another link, to a group the link does not bring to the node, or lost in a flood) is suspected, or the server lost its leases. The client follows the server.", "link")
	metricPDMissed         = metrics.NewCounterVec("renumber_agent_dhcpv6_listener_dropped_total", "Packets to the DHCPv6 servers' port the client's node's listener kept but its receive queue dropped unread (a flood faster than the agent reads): a client message under the client's DUID among them went unheard.", "link")
)

// Collectors returns this package's metrics.
func Collectors() []metrics.Collector {
	return []metrics.Collector{metricPrefixEvents, metricRejected, metricIgnored, metricContradictions, metricCrowded, metricConflict, metricRAEntries, metricAnswerMode, metricReadLag, metricPDConflict, metricPDImpersonations, metricPDDropped, metricPDMissed, metricMemoryWrites}
}
