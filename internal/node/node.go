// Package node is the agent's view of its own Node: a merge patch of the digest
// annotation (and nothing else), and a metadata-only watch of that one Node.
package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/digest"
)

var nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// Annotation patches the digest annotation on one Node.
type Annotation struct {
	Client metadata.Interface
	Node   string
}

// Patch sets the annotation to value with a JSON merge patch that names only that
// key: no other field of the Node is sent, so nothing else can be overwritten.
func (a Annotation) Patch(ctx context.Context, value string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{digest.Annotation: value}}})
	if err != nil {
		return err
	}
	if _, err := a.Client.Resource(nodesGVR).Patch(ctx, a.Node, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching node %q: %w", a.Node, err)
	}
	return nil
}

// Watch calls live with the annotation's value each time it may have changed on
// the Node named name (metadata only: kubelet status churn costs little), until
// ctx ends. synced is closed after the first list.
func Watch(ctx context.Context, client metadata.Interface, name string, live func(value string, exists bool)) (synced <-chan struct{}) {
	// A plain informer, not client-go's informer factories: those link every
	// typed API group into the agent (7 MiB of binary, resident).
	nodes := client.Resource(nodesGVR)
	only := func(o metav1.ListOptions) metav1.ListOptions {
		o.FieldSelector = "metadata.name=" + name
		return o
	}
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, only(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return nodes.Watch(ctx, only(o))
		},
	}, &metav1.PartialObjectMetadata{}, 10*time.Minute, cache.Indexers{})
	report := func(obj any) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return
		}
		v, exists := m.Annotations[digest.Annotation]
		live(v, exists)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: report,
		UpdateFunc: func(old, new any) {
			o, _ := old.(*metav1.PartialObjectMetadata)
			n, _ := new.(*metav1.PartialObjectMetadata)
			if o != nil && n != nil {
				ov, oOK := o.Annotations[digest.Annotation]
				nv, nOK := n.Annotations[digest.Annotation]
				if ov == nv && oOK == nOK {
					return // a resync, or another field changed: nothing for us
				}
			}
			report(new)
		},
		DeleteFunc: func(any) { live("", false) },
	})
	done := make(chan struct{})
	go inf.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			close(done)
		}
	}()
	return done
}
