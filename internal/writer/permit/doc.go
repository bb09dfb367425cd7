// Package permit is the discipline every object write of the writer passes,
// whatever the object: a permit from the write-storm breaker (a refusal is an
// episode: one log line, one event, the metric, a requeue for when a permit
// is back), a shadow's plan instead of the write (writer --dry-run), memos of
// what was written until the caches show it, the write counted, and the
// outcome of a step - whether retrying can help.
//
// Gate (permit.go) is that door. Behind it: the write-storm breaker and its
// token buckets (budget.go, guard.go), the memos that stand in for a write
// the caches do not show yet and the events that mark a problem's transitions
// (guard.go), and a shadow's plan (plan.go).
package permit
