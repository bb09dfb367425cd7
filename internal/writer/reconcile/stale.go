package reconcile

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// deleted marks an object the cache holds but the API server does not.
const deleted = "\x00deleted"

// CheckStaleness compares every cache with the API server each interval, on
// every replica (reads only). A watch can look connected and deliver nothing (it
// happened in a real incident): an object whose version differs between the
// cache and a fresh list in two consecutive checks, with the API's version
// unchanged in between (the watch had a whole interval to deliver it), means
// the cache fell behind. Then: the metric, one log line, and a fresh informer
// (a full re-list) replaces the stale one.
func (r *Reconciler) CheckStaleness(ctx context.Context, interval time.Duration) {
	suspects := map[*watched]map[string]string{}
	t := r.clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		for _, w := range r.all() {
			if !w.synced() {
				continue
			}
			api, err := r.versions(ctx, w)
			if err != nil {
				r.log.Debug("staleness check failed", "resource", w.name, "err", err)
				continue
			}
			now := differences(api, cached(w))
			prev := suspects[w]
			suspects[w] = now
			behind := 0
			for name, v := range now {
				if prev[name] == v {
					behind++
				}
			}
			if behind == 0 {
				continue
			}
			metricRelists.With(w.name).Inc()
			r.log.Warn("cache fell behind the API server; re-listing", "resource", w.name, "objects", behind)
			if w.restart(ctx) {
				delete(suspects, w)
			}
		}
	}
}

// versions lists name -> resourceVersion from the API server, metadata only.
func (r *Reconciler) versions(ctx context.Context, w *watched) (map[string]string, error) {
	out := map[string]string{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := r.meta.Resource(w.gvr).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, o := range list.Items {
			out[cacheKey(o.Namespace, o.Name)] = o.ResourceVersion
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

func cached(w *watched) map[string]string {
	out := map[string]string{}
	for _, o := range w.store().List() {
		if m, err := meta.Accessor(o); err == nil {
			out[cacheKey(m.GetNamespace(), m.GetName())] = m.GetResourceVersion()
		}
	}
	return out
}

// differences returns the objects whose cached version differs from the API's:
// name -> the API's version (or deleted).
func differences(api, cache map[string]string) map[string]string {
	out := map[string]string{}
	for name, v := range api {
		if cache[name] != v {
			out[name] = v
		}
	}
	for name := range cache {
		if _, ok := api[name]; !ok {
			out[name] = deleted
		}
	}
	return out
}

// cacheKey is an informer's key for an object: "name" or "namespace/name".
func cacheKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
