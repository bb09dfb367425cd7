// Package caches builds and runs the writer's informers, on every replica (a
// standby takes over with warm caches): Nodes, DynamicPrefixes, Services, the
// Cilium DaemonSet, and (kinds.go) the pool kinds the API server serves,
// CiliumBGPAdvertisements and Calico IPPools. Each cache keeps only the fields
// the writer reads, and each informer tells a Handler only of the changes that
// matter to it.
//
// Underneath: informers that list with plain LIST semantics and can be
// replaced by a fresh one (informer.go), and a check that notices a cache
// that fell behind the API server (staleness.go).
package caches
