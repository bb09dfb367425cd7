package apply

import (
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// Writer makes the writes.
type Writer struct {
	*permit.Gate
	Client dynamic.Interface  // pools, status, advertisements; writes pass the leader gate
	Meta   metadata.Interface // Services
	// TargetKeys are the annotations HA Services get the DNS target under, in
	// order (holdings.DefaultTargetKeys; none: no target is written).
	TargetKeys []string
	// L2Nudge reports whether HA Services need the L2 announcer nudge
	// (render.ServiceOptions); nil: never.
	L2Nudge func() bool

	// What was written last, per object, until the caches show it.
	statuses permit.Memo[api.Status]
	pools    permit.Memo[holdings.Held]
	services permit.Memo[holdings.Annotations]
	adverts  permit.Memo[string]
	deleted  permit.Memo[struct{}] // advertisements deleted, until the cache shows it
	// finalized: DynamicPrefixes whose finalizer was removed, likewise.
	finalized permit.Memo[struct{}]
	// given is who each DynamicPrefix's last pass gave each address
	// (render.HeldByWriter), per DynamicPrefix, for this leader term.
	givenMu sync.Mutex
	given   map[string]render.Given
	// published is, per DynamicPrefix, who its last pass found a load
	// balancer publishing an address it gave another for (Concerned).
	published map[string][]string
}

// CacheBehind is when a pass that left an object alone because its cache
// had not shown the writer's own last write to it looks again: the watch
// event that shows the write queues the pass sooner.
const CacheBehind = time.Second

// Forget starts a new leader term: who was given each address is read
// again from what the caches show. The memos of the writer's own writes
// stay: each lasts only until the caches show a newer version of its
// object, and while they do not, a write would be made against a version
// the last term's write replaced (a conflict, and the object written twice:
// a renewal missed on a slow API server ends a term in the middle of a
// renumbering).
func (w *Writer) Forget() {
	w.givenMu.Lock()
	w.given, w.published = nil, nil
	w.givenMu.Unlock()
}

// Sweep forgets what the writer keeps of each object present says is gone
// (deleted): the memos of its last writes, which only a newer version in
// the caches would drop, and its write budget. Without it every object the
// writer ever wrote stayed in its memory, and a tenant creating and deleting
// Services grew the writer until it was killed (red team r9b). present must
// answer true for an object its cache may not show yet (one the writer
// created).
func (w *Writer) Sweep(present func(permit.Object) bool) {
	w.statuses.Sweep(present)
	w.pools.Sweep(present)
	w.services.Sweep(present)
	w.adverts.Sweep(present)
	w.deleted.Sweep(present)
	w.finalized.Sweep(present)
	w.Gate.Sweep(present)
}
