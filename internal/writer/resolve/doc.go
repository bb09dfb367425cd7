// Package resolve is the writer's DNS source (acquisition.dns): it asks each
// server for a name's AAAA record, each time the answers' TTL runs out
// (within the spec's bounds), and turns each server's standing into a report
// the decision counts as one vote (decide.Report.Resolver). The question on
// the wire (wire.go), what an answer makes of a server's standing (standing.go,
// pure) and the polling of every followed name while the writer leads
// (sources.go) are its three parts. It writes nothing.
package resolve
