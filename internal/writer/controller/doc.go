// Package controller runs the writer: it builds the client-go clients (every
// request counted, every mutating request passing the leader's gate,
// kube.go), assembles the caches, the ballot and the controller over them
// (pipeline.go, flags.go), and drives the passes (reconcile.go, pass.go): every
// replica queues work from the caches' events, only the leader drains the
// queue, and a pass over one DynamicPrefix decides (package decide), renders
// (package render) and hands each object to package apply, which writes only
// the differences.
package controller
