// Package render turns a decision into what each object should hold, pure:
// the entries of a pool that follows a DynamicPrefix (pool.go, with the
// ownership records that tell our entries from the user's, record.go), the
// annotations of an HA Service (service.go), and the DynamicPrefix's status
// (status.go). User entries are kept; nothing is guessed from the shape of an
// address. It holds no client: package apply compares and writes.
package render
