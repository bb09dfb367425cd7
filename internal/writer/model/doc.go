// Package model is the writer's model of a DynamicPrefix, free of Kubernetes:
// its spec parsed once into a validated Model that every stage reads instead
// of the raw strings (spec.go; the spec's types are internal/dynamicprefix,
// shared with the agent), the address arithmetic the model resolves names
// with (prefix.go), the address a router's prefix translation maps to
// (mapping.go), what the model resolves on a prefix and the states of its
// history (status.go), and the errors status conditions report. It imports
// no k8s.io package (internal/layers_test.go keeps it so), so decide, which
// reads it, stays a pure function too. The served object, its status and the
// keys objects are known by are internal/writer/api.
package model
