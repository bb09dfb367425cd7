// The informer plumbing: informers that list with
// plain LIST semantics, and Watched, an informer that can be replaced by a fresh
// one (a full re-list) when its watch is found to have fallen behind.

package caches

import (
	"context"
	"sync"
	"time"

	"github.com/renumber/renumber/internal/writer/backends"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
)

// plainList makes a reflector use LIST then WATCH rather than a streaming list
// (which rides on a watch): the re-list that heals a silent watch must not
// depend on a watch delivering anything.
type plainList struct{ *cache.ListWatch }

func (plainList) IsWatchListSemanticsUnSupported() bool { return true }

// Plain builds an informer with plain LIST semantics.
func Plain(list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), example runtime.Object) cache.SharedIndexInformer {
	lw := &cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}
	return cache.NewSharedIndexInformer(plainList{lw}, example, 0, cache.Indexers{})
}

// Dynamic is an informer over gvr, within scope, with plain LIST semantics.
func Dynamic(client dynamic.Interface, gvr schema.GroupVersionResource, scope backends.Scope) cache.SharedIndexInformer {
	res := client.Resource(gvr).Namespace(scope.Namespace)
	return Plain(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return res.List(ctx, scope.Options(o))
	},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, scope.Options(o))
		},
		&unstructured.Unstructured{})
}

// Slimmed is Dynamic with read as its transform, and its lists made page by
// page (slimList), each object slimmed before the next page is asked for.
func Slimmed(client dynamic.Interface, gvr schema.GroupVersionResource, scope backends.Scope, slim, read cache.TransformFunc) cache.SharedIndexInformer {
	res := client.Resource(gvr).Namespace(scope.Namespace)
	inf := Plain(slimList(res, scope, slim),
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, scope.Options(o))
		},
		&unstructured.Unstructured{})
	_ = inf.SetTransform(read)
	return inf
}

// slimList lists res within scope by pages of slimPage objects, each page
// slimmed before the next is asked for: no list holds more than one page of
// objects whole.
func slimList(res dynamic.ResourceInterface, scope backends.Scope, slim cache.TransformFunc) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		out := &unstructured.UnstructuredList{Object: map[string]any{}}
		var meta metav1.ListMeta
		err := pagedBy(ctx, slimPage, scope.Options(o), &meta, func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
			p, err := res.List(ctx, o)
			if err != nil {
				return nil, err
			}
			for i := range p.Items {
				kept, err := slim(&p.Items[i])
				if err != nil {
					return nil, err
				}
				out.Items = append(out.Items, *kept.(*unstructured.Unstructured))
			}
			return p, nil
		})
		out.SetResourceVersion(meta.ResourceVersion)
		return out, err
	}
}

// Metadata is a metadata-only informer over gvr with plain LIST semantics.
func Metadata(client metadata.Interface, gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	res := client.Resource(gvr)
	return Plain(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		res.Watch, &metav1.PartialObjectMetadata{})
}

// RestartTimeout bounds a (re-)list: a broken path must not wedge its caller.
const RestartTimeout = time.Minute

// Watched is one informer that can be replaced by a fresh one.
type Watched struct {
	Name string // the resource, for logs and metrics
	GVR  schema.GroupVersionResource
	// Scope narrows what the informer watches: a check against the API lists
	// the same.
	Scope backends.Scope
	build func() cache.SharedIndexInformer // a new informer with its handlers

	mu   sync.Mutex
	inf  cache.SharedIndexInformer
	stop context.CancelFunc
}

// NewWatched builds the first informer with build; build is called again for
// every restart and must add the handlers each time.
func NewWatched(name string, gvr schema.GroupVersionResource, build func() cache.SharedIndexInformer) *Watched {
	return &Watched{Name: name, GVR: gvr, build: build, inf: build()}
}

func (w *Watched) informer() cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inf
}

// Store is the current informer's store.
func (w *Watched) Store() cache.Store { return w.informer().GetStore() }

// Indexer is the current informer's store with its indexes.
func (w *Watched) Indexer() cache.Indexer { return w.informer().GetIndexer() }

// Synced reports whether the current informer has listed.
func (w *Watched) Synced() bool { return w.informer().HasSynced() }

// Run starts the current informer under ctx.
func (w *Watched) Run(ctx context.Context) {
	w.mu.Lock()
	ictx, cancel := context.WithCancel(ctx)
	w.stop = cancel
	inf := w.inf
	w.mu.Unlock()
	go inf.RunWithContext(ictx)
}

// Halt stops the current informer.
func (w *Watched) Halt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
	}
}

// RunSynced starts the informer and waits (at most RestartTimeout) until it has
// listed; when it has not, it is stopped again and false returned.
func (w *Watched) RunSynced(ctx context.Context) bool {
	w.Run(ctx)
	wait, cancel := context.WithTimeout(ctx, RestartTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(wait.Done(), w.Synced) {
		w.Halt()
		return false
	}
	return true
}

// Restart builds a fresh informer, waits until its list is done, then swaps it
// in and stops the old one: readers never see an empty cache.
func (w *Watched) Restart(ctx context.Context) bool {
	fresh := w.build()
	ictx, cancel := context.WithCancel(ctx)
	go fresh.RunWithContext(ictx)
	wait, stop := context.WithTimeout(ctx, RestartTimeout)
	defer stop()
	if !cache.WaitForCacheSync(wait.Done(), fresh.HasSynced) {
		cancel()
		return false
	}
	w.mu.Lock()
	old := w.stop
	w.inf, w.stop = fresh, cancel
	w.mu.Unlock()
	if old != nil {
		old()
	}
	return true
}

// Unwrap returns the object inside a tombstone (a delete the watch missed).
func Unwrap(o any) any {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return o
}

// Name is an object's name ("" if it has none).
func Name(o any) string {
	if m, err := meta.Accessor(Unwrap(o)); err == nil {
		return m.GetName()
	}
	return ""
}

// Version is an object's resourceVersion ("" if it has none).
func Version(o any) string {
	if m, err := meta.Accessor(Unwrap(o)); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}
