// Package render turns a decision into what each object should hold, pure:
// the entries of a pool that follows a DynamicPrefix (pool.go), the
// annotations of an HA Service (service.go), and the DynamicPrefix's status
// (status.go). What objects hold and which of it is ours - entries, ownership
// records, a Service's annotations as cached - are package holdings' nouns.
// User entries are kept; nothing is guessed from the shape of an address. It
// holds no client: package apply compares and writes.
package render
