// Package holdings names what an object that follows a DynamicPrefix holds
// and what of it is ours: a pool's entries and its form, the ownership record
// that tells our entries from the user's, and what a Service asks for and
// carries under its annotations, as the writer's caches keep it. It is the
// vocabulary the backends read objects into and render plans in; it decides
// nothing and holds no client.
package holdings
