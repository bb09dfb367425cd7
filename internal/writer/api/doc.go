// Package api is the dynamic-prefix.io API as the writer serves and reads
// it: the DynamicPrefix object and its status (types.go; the spec's types
// are internal/dynamicprefix, shared with the agent, and the spec parsed is
// internal/writer/model), the status as a merge patch (patch.go), and the
// keys objects are known by in the caches and the queue (keys.go). It holds
// no client.
package api
