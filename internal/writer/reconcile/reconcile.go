// Package reconcile is the writer's loop. Informers (running on every replica, so
// a standby takes over with warm caches) feed a rate-limited queue keyed by
// DynamicPrefix; only the leader drains it. A pass computes the decision from the
// node digests, renders status and pool entries, compares them with what is
// live in canonical form, and writes only differences.
package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/backend"
	"github.com/renumber/renumber/internal/writer/budget"
	"github.com/renumber/renumber/internal/writer/dynamicprefix"
)

// Recorder emits Kubernetes events (only at transitions).
type Recorder interface {
	Event(regarding *unstructured.Unstructured, warning bool, reason, note string)
}

// Config of the loop.
type Config struct {
	// Debounce groups node digest changes arriving close together (all nodes see
	// the same RA within milliseconds) into one pass.
	Debounce time.Duration
	// Budget limits our own object writes (the write-storm breaker).
	Budget budget.Limits
	// Staleness is how often CheckStaleness compares caches with the API server.
	Staleness time.Duration
	// NodeGrace is how long a Node may be not Ready before its digest stops
	// voting (0: it always votes).
	NodeGrace time.Duration
	// BackendGroups are the API groups of pool kinds: a CRD of one of them being
	// installed or removed makes the writer look for pool kinds again.
	BackendGroups []string
}

// Reconciler is the writer's loop.
type Reconciler struct {
	cfg      Config
	client   dynamic.Interface // writes pass the leader gate
	meta     metadata.Interface
	core     corev1client.NodesGetter // typed reads (Nodes, in protobuf)
	discover Discover
	clock    clock.WithTicker
	log      *slog.Logger
	recorder Recorder

	nodes    *watched
	dps      *watched
	services *watched
	crds     *watched
	queue    workqueue.TypedRateLimitingInterface[string]

	bmu        sync.Mutex
	pools      []*pooled // the pool kinds followed now
	bgp        *watched  // nil while CiliumBGPAdvertisement is not served
	bgpGVR     schema.GroupVersionResource
	rediscover chan struct{} // a backend CRD changed

	budget    *budget.Budget
	mu        sync.Mutex
	throttled map[string]bool    // objects whose last write the budget refused
	memo      map[string]memo    // what we wrote last, per object
	announced map[string]string  // last event text per subject, so events mark transitions
	badNodes  map[string]string  // node -> garbled digest value already reported
	lapsed    map[string]bool    // nodes whose vote lapsed (not Ready past the grace)
	decoded   map[string]decoded // node -> its digest, decoded once per value
}

// memo remembers a write until the informer shows it: if the cache still holds
// the version we wrote from, the written content stands in for it.
type memo struct {
	base    string // resourceVersion the write was computed from
	written any
}

// New builds the informers; call Run to start them.
func New(cfg Config, client dynamic.Interface, meta metadata.Interface, core corev1client.NodesGetter, discover Discover, clk clock.WithTicker, log *slog.Logger, rec Recorder) *Reconciler {
	r := &Reconciler{
		cfg: cfg, client: client, meta: meta, core: core, discover: discover, clock: clk, log: log, recorder: rec,
		rediscover: make(chan struct{}, 1),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dynamicprefixes", Clock: clk}),
		budget:    budget.New(cfg.Budget),
		throttled: map[string]bool{},
		memo:      map[string]memo{},
		announced: map[string]string{},
		badNodes:  map[string]string{},
		lapsed:    map[string]bool{},
		decoded:   map[string]decoded{},
	}
	r.nodes = r.watchNodes()
	r.dps = newWatched("dynamicprefixes", dynamicprefix.GVR, func() cache.SharedIndexInformer {
		inf := dynamicInformer(client, dynamicprefix.GVR)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { r.enqueue(nameOf(o), 0) },
			UpdateFunc: func(old, new any) {
				// Our own status writes change nothing we act on: only spec changes.
				if o, n := old.(*unstructured.Unstructured), new.(*unstructured.Unstructured); o.GetGeneration() != n.GetGeneration() {
					r.enqueue(n.GetName(), 0)
				}
			},
			DeleteFunc: func(o any) { r.enqueue(nameOf(o), 0) },
		})
		return inf
	})
	r.services = r.watchServices()
	served, err := discover()
	if err != nil {
		log.Warn("discovery failed; retrying in the background", "err", err)
		r.rediscover <- struct{}{}
	}
	for _, k := range served.Pools {
		r.pools = append(r.pools, r.newPooled(k))
	}
	if !served.BGP.Empty() {
		r.bgp, r.bgpGVR = r.watchBGP(served.BGP), served.BGP
	}
	if len(cfg.BackendGroups) > 0 {
		r.crds = r.watchCRDs()
	}
	return r
}

// Kinds returns the names of the pool kinds followed now.
func (r *Reconciler) Kinds() []string {
	var out []string
	for _, p := range r.backends() {
		out = append(out, p.kind.Name)
	}
	return out
}

func digestOf(o any) string {
	if m, ok := o.(*metav1.PartialObjectMetadata); ok {
		if v, ok := m.Annotations[digest.Annotation]; ok {
			return "=" + v
		}
	}
	return ""
}

func nameOf(o any) string {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u.GetName()
	}
	return ""
}

func (r *Reconciler) poolChanged(k *backend.Kind, old, new any) {
	for _, o := range []any{old, new} {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		obj, ours, _ := k.Decode(u)
		switch {
		case !ours:
		case obj.Follow.DynamicPrefix != "":
			r.enqueue(obj.Follow.DynamicPrefix, 0)
		default:
			r.queue.Add(releaseKey(k, obj.Key()))
		}
	}
}

// releaseKey names a release of the object with cache key key ("name" or
// "namespace/name").
func releaseKey(k *backend.Kind, key string) string { return "release/" + k.Resource + "/" + key }

func (r *Reconciler) enqueue(name string, after time.Duration) {
	if name == "" {
		return
	}
	if after > 0 {
		r.queue.AddAfter("dp/"+name, after)
		return
	}
	r.queue.Add("dp/" + name)
}

func (r *Reconciler) enqueueAll(after time.Duration) {
	for _, o := range r.dps.store().List() {
		r.enqueue(nameOf(o), after)
	}
}

func (r *Reconciler) all() []*watched {
	ws := []*watched{r.nodes, r.dps, r.services}
	if bgp, _ := r.bgpWatch(); bgp != nil {
		ws = append(ws, bgp)
	}
	for _, p := range r.backends() {
		ws = append(ws, p.w)
	}
	return ws
}

// Run starts the informers (on every replica) and returns once they synced.
func (r *Reconciler) Run(ctx context.Context) bool {
	var synced []cache.InformerSynced
	bgp, _ := r.bgpWatch()
	for _, w := range []*watched{r.nodes, r.dps, r.services, bgp} {
		if w != nil {
			w.run(ctx)
			synced = append(synced, w.synced)
		}
	}
	for _, p := range r.backends() {
		p.run(ctx)
		synced = append(synced, p.w.synced)
	}
	if r.crds != nil {
		r.crds.run(ctx)
		synced = append(synced, r.crds.synced)
		go r.followBackends(ctx)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// Synced reports whether every cache has synced (readiness).
func (r *Reconciler) Synced() bool {
	for _, w := range r.all() {
		if !w.synced() {
			return false
		}
	}
	return true
}

// Lead drains the queue until ctx ends (leadership lost or shutdown). Every
// DynamicPrefix and every released pool is checked once at the start of a term.
func (r *Reconciler) Lead(ctx context.Context) {
	r.mu.Lock()
	r.memo = map[string]memo{} // a new term trusts only what the caches show
	r.mu.Unlock()
	r.enqueueAll(0)
	for _, p := range r.backends() {
		for _, o := range p.w.store().List() {
			r.poolChanged(p.kind, nil, o)
		}
	}
	for _, o := range r.services.store().List() {
		r.serviceChanged(o)
	}
	stop := context.AfterFunc(ctx, func() { r.queue.Add(wakeKey) })
	defer stop()
	for {
		key, quit := r.queue.Get()
		if quit {
			return
		}
		if ctx.Err() != nil {
			r.queue.Done(key)
			if key != wakeKey {
				r.queue.Add(key) // the next leader term (ours or after a takeover) handles it
			}
			return
		}
		if key == wakeKey {
			r.queue.Done(key)
			continue
		}
		err := r.process(ctx, key)
		r.queue.Done(key)
		switch {
		case err == nil:
			r.queue.Forget(key)
		case ctx.Err() != nil:
			return
		default:
			metricErrors.Inc()
			r.log.Warn("sync failed; retrying with backoff", "key", key, "err", err)
			r.queue.AddRateLimited(key)
		}
	}
}

const wakeKey = "\x00wake"

func (r *Reconciler) process(ctx context.Context, key string) error {
	switch {
	case strings.HasPrefix(key, "dp/"):
		return r.syncDynamicPrefix(ctx, strings.TrimPrefix(key, "dp/"))
	case strings.HasPrefix(key, "release-svc/"):
		parts := strings.SplitN(key, "/", 3)
		return r.releaseService(ctx, parts[1], parts[2])
	case strings.HasPrefix(key, "release/"):
		parts := strings.SplitN(key, "/", 3)
		if p := r.backend(parts[1]); p != nil {
			return r.release(ctx, p, parts[2])
		}
	}
	return nil
}

// announce emits an event when the text for subject differs from the last one.
func (r *Reconciler) announce(subject string, regarding *unstructured.Unstructured, warning bool, reason, note string) {
	r.mu.Lock()
	same := r.announced[subject] == reason+note
	r.announced[subject] = reason + note
	r.mu.Unlock()
	if !same {
		r.recorder.Event(regarding, warning, reason, note)
	}
}

func (r *Reconciler) forget(subject string) {
	r.mu.Lock()
	delete(r.announced, subject)
	r.mu.Unlock()
}

// remembered returns the content written from base, if the cache still shows base.
func (r *Reconciler) remembered(key, base string) (any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.memo[key]
	if !ok || m.base != base {
		delete(r.memo, key)
		return nil, false
	}
	return m.written, true
}

// permit takes a write permit for the object key. A refusal starts (or
// continues) a throttling episode: one event and log line per episode, the
// metric, and the DynamicPrefix requeued for when a permit is back. The episode
// ends when the object's bucket is full again (see calm).
func (r *Reconciler) permit(key string, regarding *unstructured.Unstructured, dp string) error {
	now := r.clock.Now()
	ok, wait := r.budget.Take(key, now)
	r.mu.Lock()
	was := r.throttled[key]
	if !ok {
		r.throttled[key] = true
	}
	r.mu.Unlock()
	if ok {
		if was {
			// Still in an episode: look again when the bucket will be full.
			_, in := r.budget.Calm(key, now)
			r.enqueue(dp, in)
		}
		return nil
	}
	metricRefused.With(strings.SplitN(key, "/", 2)[0]).Inc()
	if !was {
		r.log.Warn("write budget exceeded; writes to this object paused", "object", key, "next", wait.Round(time.Second))
	}
	r.announce("budget/"+key, regarding, true, "WriteBudgetExceeded",
		"more writes to this object than the budget allows (is another controller changing the same field?); writes paused")
	r.enqueue(dp, wait)
	return fmt.Errorf("%s: %w (next permit in %s)", key, budget.ErrExceeded, wait.Round(time.Second))
}

// calm ends key's throttling episode once its bucket is full again; called when
// a pass finds nothing to write to it.
func (r *Reconciler) calm(key, dp string) {
	r.mu.Lock()
	was := r.throttled[key]
	r.mu.Unlock()
	if !was {
		return
	}
	calm, in := r.budget.Calm(key, r.clock.Now())
	if !calm {
		r.enqueue(dp, in)
		return
	}
	r.mu.Lock()
	delete(r.throttled, key)
	r.mu.Unlock()
	r.forget("budget/" + key)
	r.log.Info("writes flow again", "object", key)
}

func (r *Reconciler) remember(key, base string, written any) {
	r.mu.Lock()
	r.memo[key] = memo{base: base, written: written}
	r.mu.Unlock()
}
