package dynamicprefix

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// Watch calls onChange with every DynamicPrefix (sorted by name) after the first
// list and whenever a spec changes or an object comes or goes. Status-only
// updates (generation unchanged) are dropped: they cannot change what a reader of
// specs does. Objects that fail to decode are logged and left out.
func Watch(ctx context.Context, client dynamic.Interface, log *slog.Logger, onChange func([]*DynamicPrefix)) cache.SharedIndexInformer {
	// A plain informer, not client-go's informer factories: those link every
	// typed API group into the agent.
	res := client.Resource(GVR)
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		WatchFuncWithContext: res.Watch,
	}, &unstructured.Unstructured{}, 10*time.Minute, cache.Indexers{})
	var mu sync.Mutex
	var synced atomic.Bool
	notify := func() {
		mu.Lock() // one caller at a time, each with the store's latest
		defer mu.Unlock()
		var out []*DynamicPrefix
		for _, o := range inf.GetStore().List() {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			dp, err := FromUnstructured(u)
			if err != nil {
				log.Warn("ignoring DynamicPrefix", "name", u.GetName(), "err", err)
				continue
			}
			out = append(out, dp)
		}
		slices.SortFunc(out, func(a, b *DynamicPrefix) int { return strings.Compare(a.Name, b.Name) })
		onChange(out)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) {
			if synced.Load() {
				notify()
			}
		},
		UpdateFunc: func(old, new any) {
			o, _ := old.(*unstructured.Unstructured)
			n, _ := new.(*unstructured.Unstructured)
			if o != nil && n != nil && o.GetGeneration() == n.GetGeneration() {
				return
			}
			notify()
		},
		DeleteFunc: func(any) { notify() },
	})
	go inf.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			synced.Store(true)
			notify()
		}
	}()
	return inf
}
