package reconcile

import (
	"context"
	"sync"
	"time"

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

// plainInformer builds an informer with plain LIST semantics.
func plainInformer(list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), example runtime.Object) cache.SharedIndexInformer {
	lw := &cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}
	return cache.NewSharedIndexInformer(plainList{lw}, example, 0, cache.Indexers{})
}

// dynamicInformer is an informer over gvr with plain LIST semantics.
func dynamicInformer(client dynamic.Interface, gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	res := client.Resource(gvr)
	return plainInformer(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		res.Watch, &unstructured.Unstructured{})
}

// metadataInformer is a metadata-only informer over gvr with plain LIST semantics.
func metadataInformer(client metadata.Interface, gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	res := client.Resource(gvr)
	return plainInformer(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		res.Watch, &metav1.PartialObjectMetadata{})
}

// restartTimeout bounds a re-list: a broken path must not wedge the checker.
const restartTimeout = time.Minute

// watched is one informer that can be replaced by a fresh one (a full re-list)
// when its watch is found to have fallen behind the API server.
type watched struct {
	name  string
	gvr   schema.GroupVersionResource
	build func() cache.SharedIndexInformer // a new informer with its handlers

	mu   sync.Mutex
	inf  cache.SharedIndexInformer
	stop context.CancelFunc
}

func newWatched(name string, gvr schema.GroupVersionResource, build func() cache.SharedIndexInformer) *watched {
	return &watched{name: name, gvr: gvr, build: build, inf: build()}
}

func (w *watched) informer() cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inf
}

func (w *watched) store() cache.Store { return w.informer().GetStore() }

func (w *watched) synced() bool { return w.informer().HasSynced() }

// run starts the current informer under ctx.
func (w *watched) run(ctx context.Context) {
	w.mu.Lock()
	ictx, cancel := context.WithCancel(ctx)
	w.stop = cancel
	inf := w.inf
	w.mu.Unlock()
	go inf.RunWithContext(ictx)
}

// halt stops the current informer.
func (w *watched) halt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
	}
}

// restart builds a fresh informer, waits until its list is done, then swaps it
// in and stops the old one: readers never see an empty cache.
func (w *watched) restart(ctx context.Context) bool {
	fresh := w.build()
	ictx, cancel := context.WithCancel(ctx)
	go fresh.RunWithContext(ictx)
	wait, stop := context.WithTimeout(ctx, restartTimeout)
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
