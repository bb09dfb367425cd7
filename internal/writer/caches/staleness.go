// Checker notices caches that fell behind the API server. A watch can
// look connected and deliver nothing (it happened in a real incident, after a
// storage stall): controllers then see nothing and log nothing. The check reads
// only: a metadata-only list per cached resource, every interval.

package caches

import (
	"context"
	"log/slog"
	"time"

	"github.com/renumber/renumber/internal/writer/api"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/metrics"
)

var metricRelists = metrics.NewCounterVec("renumber_writer_cache_relists_total", "Caches found behind the API server and re-listed, by resource.", "resource")

// StalenessCollectors returns this package's metrics.
func StalenessCollectors() []metrics.Collector { return []metrics.Collector{metricRelists} }

// Checker compares caches with the API server.
type Checker struct {
	Lister metadata.Interface
	// Caches returns the caches to check now (pool kinds come and go).
	Caches func() []*Watched
	Clock  clock.WithTicker
	Log    *slog.Logger
}

// deleted marks an object the cache holds but the API server does not.
const deleted = "\x00deleted"

// Run compares every cache with the API server each interval, on every replica
// (reads only), until ctx ends. An object whose version differs between the
// cache and a fresh list in two consecutive checks, with the API's version
// unchanged in between (the watch had a whole interval to deliver it), means
// the cache fell behind. Then: the metric, one log line, and a fresh informer
// (a full re-list) replaces the stale one.
func (c *Checker) Run(ctx context.Context, interval time.Duration) {
	suspects := map[*Watched]map[string]string{}
	t := c.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		for _, w := range c.Caches() {
			if !w.Synced() {
				continue
			}
			api, err := c.versions(ctx, w)
			if err != nil {
				c.Log.Debug("staleness check failed", "resource", w.Name, "err", err)
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
			metricRelists.With(w.Name).Inc()
			c.Log.Warn("cache fell behind the API server; re-listing", "resource", w.Name, "objects", behind)
			if w.Restart(ctx) {
				delete(suspects, w)
			}
		}
	}
}

// versions lists name -> resourceVersion from the API server, metadata only.
func (c *Checker) versions(ctx context.Context, w *Watched) (map[string]string, error) {
	out := map[string]string{}
	opts := w.Scope.Options(metav1.ListOptions{Limit: 500})
	for {
		list, err := c.Lister.Resource(w.GVR).Namespace(w.Scope.Namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, o := range list.Items {
			out[api.Key(o.Namespace, o.Name)] = o.ResourceVersion
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

func cached(w *Watched) map[string]string {
	out := map[string]string{}
	for _, o := range w.Store().List() {
		if m, err := meta.Accessor(o); err == nil {
			out[api.Key(m.GetNamespace(), m.GetName())] = m.GetResourceVersion()
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
