// Package decide is the writer's decision, from the node digests to the prefix
// a DynamicPrefix follows, as pure functions: no Kubernetes type, no I/O, no
// lock, no logger. The ballot applies the node rule to the Nodes it is given:
// which digests vote, each decoded once, and what changed, noted for the
// caller to report (votes.go; the writer's shell is controller.Ballot). For
// turns the votes, the parsed spec and the previous status into the
// decision: the current prefix and the prefixes still draining
// (aggregate.go, deterministic).
package decide
