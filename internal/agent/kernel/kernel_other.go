//go:build !linux

package kernel

import "context"

// Run does nothing off Linux: netlink exists only there.
func (w *Watcher) Run(ctx context.Context) {
	w.Log.Error("kernel address events need Linux; only Router Advertisements are observed")
	<-ctx.Done()
}
