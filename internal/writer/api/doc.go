// Package api is the writer's model of the dynamic-prefix.io API: the
// DynamicPrefix object and its status (types.go; the spec's types are
// internal/dynamicprefix, shared with the agent), a spec parsed once into a
// validated Model that every stage reads instead of the raw strings (spec.go),
// the address arithmetic the model resolves names with (prefix.go), the
// errors status conditions report, and the keys objects are known by in the
// caches and the queue (keys.go). It holds no client.
package api
