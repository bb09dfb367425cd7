// The Controller drives the writer's passes. Given the caches (read through
// Caches and Voters, filled elsewhere), a pass over one DynamicPrefix computes
// the decision from the node digests, renders its status, the entries of every
// pool that follows it, its HA Services' annotations and its BGP
// advertisements, compares each with what is live in canonical form, and
// writes only the differences. Every replica queues work; only the leader
// drains the queue (Lead). Every write passes the write-storm breaker.

package controller

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/apply"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/caches"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// Caches are what a pass reads. Each method returns the cache as it is now: a
// cache re-listed after a silent watch is a new store, and pool kinds come and go.
type Caches interface {
	DynamicPrefixes() cache.Store
	Services() cache.Indexer // Services read (holdings.CachedService), indexed by DynamicPrefix
	Pools() []backends.Cached
	// Advertisements is the CiliumBGPAdvertisement cache, nil when not served.
	Advertisements() (backends.Advertisements, schema.GroupVersionResource)
	// CalicoPools is the Calico IPPool cache, nil when not served.
	CalicoPools() (backends.IPPools, schema.GroupVersionResource)
}

// Voters gives the node digests that vote at now, and when that changes by
// time alone (zero if it will not).
type Voters interface {
	Reports(now time.Time) ([]decide.Report, time.Time)
}

// Resolvers give the reports of the DNS servers a DynamicPrefix following a
// name asks (resolve.Sources): polled from the first call on, ready once
// every server was asked; Stop ends a poll.
type Resolvers interface {
	Reports(ctx context.Context, name string, q *model.DNSSource) (reports []decide.Report, ready bool)
	Stop(name string)
}

// Recorder emits Kubernetes events (only at transitions).
type Recorder = permit.Recorder

// Config of the controller.
type Config struct {
	// Debounce groups node digest changes arriving close together (all nodes see
	// the same RA within milliseconds) into one pass.
	Debounce time.Duration
	// Budget limits our own object writes (the write-storm breaker).
	Budget permit.Limits
	// TargetKeys are the annotations HA Services get their DNS target under.
	TargetKeys []string
	// L2Nudge reports whether HA Services need the L2 announcer nudge; nil:
	// never.
	L2Nudge func() bool
	// StatusSeen bounds the wait, after a status names a new prefix, for the
	// API server's admission to admit the first object write in it (0: the
	// objects are written in the pass that wrote the status). The pass that
	// wrote the status ends there; the objects are written by a pass that
	// sees the status in the cache, and is looked again at, never waited in.
	StatusSeen time.Duration
	// Resolvers poll the names DynamicPrefixes follow (acquisition.dns);
	// nil: such a DynamicPrefix gets no reports.
	Resolvers Resolvers
	// Plan, when set, makes the controller a shadow (writer --dry-run): each
	// pass records the writes it would make there and sends none; it is run
	// with Lead without ever leading.
	Plan *permit.Plan
}

// Action is what a queue key asks for.
type Action uint8

const (
	// SyncDynamicPrefix: a pass over the DynamicPrefix Name.
	SyncDynamicPrefix Action = iota + 1
	// ReleasePool: remove our entries from the pool Namespace/Name of the kind
	// Resource, which no longer names a DynamicPrefix.
	ReleasePool
	// ReleaseService: remove our annotations from the Service Namespace/Name.
	ReleaseService
	// wake ends a blocked Get when leadership ends.
	wake
)

// Key is one item of work.
type Key struct {
	Action          Action
	Resource        string // ReleasePool: the pool kind's resource
	Namespace, Name string
}

func (k Key) String() string {
	switch k.Action {
	case ReleasePool:
		return "release " + k.Resource + "/" + api.Key(k.Namespace, k.Name)
	case ReleaseService:
		return "release services/" + api.Key(k.Namespace, k.Name)
	}
	return "dynamicprefixes/" + k.Name
}

// Controller is the writer's loop: it turns cache events into queue keys and,
// while leading, each key into one pass.
type Controller struct {
	cfg     Config
	caches  Caches
	voters  Voters
	clock   clock.Clock
	log     *slog.Logger
	events  *permit.Events
	breaker *permit.Breaker
	write   *apply.Writer
	ippools *apply.IPPools
	queue   workqueue.TypedRateLimitingInterface[Key]
	changes nodeChanges
	// problems are the last pass's, per DynamicPrefix (a status written
	// before the pools expects them again).
	problems map[string]render.Problems
	// overlaps is, per DynamicPrefix, the overlap its last pass found
	// (PrefixOverlap): a change queues every DynamicPrefix, once. Not the
	// status read: a pass that does not write its status (waiting for
	// admission, a failed write) would find it changed again at once, and
	// queue itself ahead of the queue's backoff (red team r5). Cleared at a
	// new term (Lead).
	overlaps map[string][]render.Overlap
	// admitting: DynamicPrefixes whose status names a new prefix that the
	// API server's admission may not see yet (admission).
	admitting map[string]admission
	// seeing: DynamicPrefixes whose pass waits for the cache to show the
	// writer's own status write; the watch event that shows it queues the
	// next pass (DynamicPrefixStatusChanged). Set by passes, read by the
	// cache's handler.
	seeing struct {
		sync.Mutex
		names map[string]bool
		// pooled is what each DynamicPrefix's status names pooled, as
		// the cache's handlers last saw it (notePooled).
		pooled map[string][]netip.Prefix
	}
}

// NewController returns a controller reading caches and voters and writing with client
// (pools, status, advertisements) and meta (Services).
func NewController(cfg Config, caches Caches, voters Voters, client dynamic.Interface, meta metadata.Interface, clk clock.WithTicker, log *slog.Logger, rec Recorder) *Controller {
	c := &Controller{
		cfg: cfg, caches: caches, voters: voters, clock: clk, log: log,
		problems: map[string]render.Problems{}, overlaps: map[string][]render.Overlap{}, admitting: map[string]admission{},
		events:  &permit.Events{Recorder: rec, Clock: clk},
		breaker: permit.NewBreaker(cfg.Budget),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[Key](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[Key]{Name: "dynamicprefixes", Clock: clk}),
	}
	gate := &permit.Gate{Clock: clk, Log: log, Events: c.events, Breaker: c.breaker, Requeue: c.enqueue, Plan: cfg.Plan}
	c.write = &apply.Writer{Gate: gate, Client: client, Meta: meta, TargetKeys: cfg.TargetKeys, L2Nudge: cfg.L2Nudge}
	c.ippools = &apply.IPPools{Gate: gate, Client: client}
	return c
}

// The handlers (caches.Handler): each turns a cache event into queue keys.

// DynamicPrefixChanged queues a pass over name.
func (c *Controller) DynamicPrefixChanged(name string) {
	c.enqueue(name, 0)
	c.pdLinkChanged(name)
	if c.notePooled(name) {
		c.enqueueOthers(name)
	}
}

// DynamicPrefixStatusChanged queues a pass over name if one waits for the
// cache to show the writer's own status write (lookAgain is the fallback),
// and one over every other DynamicPrefix when what the status names pooled
// moved (notePooled); otherwise a status write of ours changes nothing a
// pass acts on.
func (c *Controller) DynamicPrefixStatusChanged(name string) {
	c.seeing.Lock()
	waiting := c.seeing.names[name]
	delete(c.seeing.names, name)
	c.seeing.Unlock()
	if waiting {
		c.enqueue(name, 0)
	}
	if c.notePooled(name) {
		c.enqueueOthers(name)
	}
}

// awaitStatus marks name's pass as waiting for the cache to show the
// writer's own status write, and returns the outcome that looks again. The
// watch event may have come before the mark: if the cache shows the write
// already, the next pass is queued at once.
func (c *Controller) awaitStatus(name string) permit.Outcome {
	c.seeing.Lock()
	if c.seeing.names == nil {
		c.seeing.names = map[string]bool{}
	}
	c.seeing.names[name] = true
	c.seeing.Unlock()
	if o, ok, _ := c.caches.DynamicPrefixes().GetByKey(name); ok {
		if u, ok := o.(*unstructured.Unstructured); ok && !c.write.StatusBehind(u) {
			c.DynamicPrefixStatusChanged(name)
		}
	}
	return permit.Later(lookAgain)
}

// NodesChanged queues a pass over every DynamicPrefix, after the debounce.
func (c *Controller) NodesChanged() {
	now := c.clock.Now()
	for _, o := range c.caches.DynamicPrefixes().List() {
		c.changes.seen(caches.Name(o), now)
	}
	c.enqueueAll(c.cfg.Debounce)
}

// KindsChanged queues a pass over every DynamicPrefix.
func (c *Controller) KindsChanged() { c.enqueueAll(0) }

// CalicoPoolChanged queues a pass over the DynamicPrefix a Calico IPPool
// names (the user's annotation, or our sibling's label).
func (c *Controller) CalicoPoolChanged(p *backends.IPPool) { c.enqueue(p.Follows, 0) }

// CiliumChanged queues a pass over every DynamicPrefix: whether Services need
// the L2 announcer nudge may have changed.
func (c *Controller) CiliumChanged() { c.enqueueAll(0) }

// AdvertisementChanged queues a pass over the DynamicPrefix a was made for.
func (c *Controller) AdvertisementChanged(a *backends.CachedAdvertisement) { c.enqueue(a.MadeFor, 0) }

// PoolChanged queues a pass over the DynamicPrefix the pool follows, or its
// release when it follows none but carries our record.
func (c *Controller) PoolChanged(p *backends.Pool) {
	release := Key{Action: ReleasePool, Resource: p.Kind.Resource, Namespace: p.Namespace, Name: p.Name}
	if p.Kind.Claims {
		c.publishedChanged(p.Kind.Name+" "+p.Key(), p.Kind.PublishedOf(p.Live))
	}
	switch {
	case !p.Ours:
	case p.Err != nil: // garbled entries: the pass over its DynamicPrefix reports them
		c.enqueue(p.Follow.DynamicPrefix, 0)
	case p.Follow.DynamicPrefix != "":
		c.enqueue(p.Follow.DynamicPrefix, 0)
		if c.cfg.Plan != nil { // a release it planned before is planned no more
			c.queue.Add(release)
		}
	default:
		c.queue.Add(release)
	}
}

// ServiceChanged queues a pass over the DynamicPrefix the Service follows, or
// its release when it follows none but carries our records.
func (c *Controller) ServiceChanged(m *holdings.CachedService) {
	name := m.Follow.DynamicPrefix
	c.enqueue(name, 0)
	c.publishedChanged(api.Key(m.Namespace, m.Name), m.Published())
	// A shadow passes over the release too: one it planned before may be
	// planned no more.
	if (m.Live.IPsRecorded || m.Live.TargetsRecorded) && (name == "" || c.cfg.Plan != nil) {
		c.queue.Add(Key{Action: ReleaseService, Namespace: m.Namespace, Name: m.Name})
	}
}

// publishedChanged queues a pass over each DynamicPrefix whose last pass
// what a load balancer publishes for who (now: published) may undo
// (apply.Writer.Concerned): one of its Services' DNS targets is withheld
// from, or could move onto, an address published for who
// (render.PublishedElsewhere) - who need not follow it.
func (c *Controller) publishedChanged(who string, published []string) {
	for _, dp := range c.write.Concerned(who, published) {
		c.enqueue(dp, 0)
	}
}

func (c *Controller) enqueue(name string, after time.Duration) {
	if name == "" {
		return
	}
	k := Key{Action: SyncDynamicPrefix, Name: name}
	if after > 0 {
		c.queue.AddAfter(k, after)
		return
	}
	c.queue.Add(k)
}

func (c *Controller) enqueueAll(after time.Duration) {
	for _, o := range c.caches.DynamicPrefixes().List() {
		c.enqueue(caches.Name(o), after)
	}
}

// enqueueOthers queues a pass over every DynamicPrefix but name, at once.
func (c *Controller) enqueueOthers(name string) {
	for _, o := range c.caches.DynamicPrefixes().List() {
		if n := caches.Name(o); n != name {
			c.enqueue(n, 0)
		}
	}
}

// Lead drains the queue until ctx ends (leadership lost or shutdown). Every
// DynamicPrefix, released pool and released Service is checked once at the
// start of a term.
func (c *Controller) Lead(ctx context.Context) {
	c.write.Forget() // a new term reads who holds each address from the caches
	clear(c.admitting)
	// What each DynamicPrefix's passes found overlapping it is this term's,
	// as the writer's memory is: another leader's term may have changed it
	// since. (Every DynamicPrefix is queued here anyway; a pass that finds
	// an overlap queues them all once more, at most once a term.)
	clear(c.overlaps)
	c.enqueueAll(0)
	for _, p := range c.caches.Pools() {
		for _, o := range p.Store.List() {
			if read, ok := o.(*backends.Pool); ok {
				c.PoolChanged(read)
			}
		}
	}
	for _, o := range c.caches.Services().List() {
		if s, ok := o.(*holdings.CachedService); ok {
			c.ServiceChanged(s)
		}
	}
	stop := context.AfterFunc(ctx, func() { c.queue.Add(Key{Action: wake}) })
	defer stop()
	for {
		key, quit := c.queue.Get()
		if quit {
			return
		}
		if ctx.Err() != nil {
			c.queue.Done(key)
			if key.Action != wake {
				c.queue.Add(key) // the next leader term (ours or after a takeover) handles it
			}
			return
		}
		if key.Action == wake {
			c.queue.Done(key)
			continue
		}
		o := c.Sync(ctx, key)
		c.queue.Done(key)
		switch {
		case o.After > 0 && o.Err == nil: // waits for something outside the writer
			c.queue.Forget(key)
			c.queue.AddAfter(key, o.After)
		case !o.Retry:
			c.queue.Forget(key)
		case ctx.Err() != nil:
			return
		default:
			metricErrors.Inc()
			c.log.Warn("sync failed; retrying with backoff", "key", key, "err", o.Err)
			c.queue.AddRateLimited(key)
		}
	}
}

// Sync does the work key asks for, once.
func (c *Controller) Sync(ctx context.Context, key Key) permit.Outcome {
	if p := c.cfg.Plan; p != nil {
		p.Begin(key.String())
		defer p.Commit()
	}
	defer c.write.Sweep(c.present)
	switch key.Action {
	case SyncDynamicPrefix:
		return c.syncDynamicPrefix(ctx, key.Name)
	case ReleasePool:
		for _, p := range c.caches.Pools() {
			if p.Kind.Resource == key.Resource {
				o, wait := c.write.ReleasePool(ctx, p, api.Key(key.Namespace, key.Name), "")
				if wait > 0 {
					c.queue.AddAfter(key, wait)
				}
				return o
			}
		}
	case ReleaseService:
		o, wait := c.write.ReleaseService(ctx, c.caches.Pools(), c.caches.Services(), key.Namespace, key.Name, "")
		if wait > 0 {
			c.queue.AddAfter(key, wait)
		}
		return o
	}
	return permit.Outcome{}
}

// present reports whether o may still exist: it is in the cache the writer
// reads it from (a DynamicPrefix, a Service, a pool of a kind followed now),
// or it is of a kind whose objects the writer creates (BGP advertisements,
// Calico siblings), which its memo stands for until the cache shows them.
// A sweep after each pass (Writer.Sweep), rather than a forget on each
// delete event: the caches are what a pass reads, and a store replaced
// whole (a watch restarted, a kind no longer served) tells no deletes.
func (c *Controller) present(o permit.Object) bool {
	var store cache.Store
	switch o.Resource {
	case api.GVR.Resource:
		store = c.caches.DynamicPrefixes()
	case holdings.ServiceGVR.Resource:
		store = c.caches.Services()
	default:
		for _, p := range c.caches.Pools() {
			if p.Kind.Resource == o.Resource {
				store = p.Store
				break
			}
		}
	}
	if store == nil {
		return true
	}
	_, ok, _ := store.GetByKey(api.Key(o.Namespace, o.Name))
	return ok
}
