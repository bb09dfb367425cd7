// Package decide is the writer's decision, from the node digests to the prefix
// a DynamicPrefix follows. The ballot applies the node rule to the Node cache:
// which Nodes' digests vote, each decoded once (votes.go). For turns the votes,
// the parsed spec and the previous status into the decision: the current
// prefix and the prefixes still draining (aggregate.go, pure and
// deterministic). It holds no client.
package decide
