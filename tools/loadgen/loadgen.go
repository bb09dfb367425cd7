// Package loadgen simulates a large cluster for the writer's scale benchmark:
// Node objects created in the API server, and their digests patched as agents
// would patch them, spread over a chosen window.
package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/renumber/renumber/internal/digest"
)

// Gen creates and reports for nodes named <Prefix>00000, <Prefix>00001, ...
type Gen struct {
	Client  kubernetes.Interface
	Prefix  string
	Workers int
}

// New returns a generator using cfg without client-side rate limits.
func New(cfg *rest.Config, prefix string, workers int) (*Gen, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 1e6, 1e6
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	return &Gen{Client: cs, Prefix: prefix, Workers: workers}, nil
}

// Name is the i-th node's name.
func (g *Gen) Name(i int) string { return fmt.Sprintf("%s%05d", g.Prefix, i) }

// CreateNodes creates n Nodes carrying the digest value.
func (g *Gen) CreateNodes(ctx context.Context, n int, value string) error {
	return g.each(ctx, n, 0, func(ctx context.Context, i int) error {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: g.Name(i),
			Labels:      map[string]string{"renumber.bench/simulated": "true"},
			Annotations: map[string]string{digest.Annotation: value}}}
		_, err := g.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		return err
	})
}

// Report patches the digest of n nodes to value, the i-th at i*within/n after the
// start (as far as the API server keeps up).
func (g *Gen) Report(ctx context.Context, n int, value string, within time.Duration) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{digest.Annotation: value}}})
	if err != nil {
		return err
	}
	return g.each(ctx, n, within, func(ctx context.Context, i int) error {
		_, err := g.Client.CoreV1().Nodes().Patch(ctx, g.Name(i), types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// each runs Each on the generator's workers, naming the node in an error.
func (g *Gen) each(ctx context.Context, n int, within time.Duration, do func(context.Context, int) error) error {
	return Each(ctx, n, g.Workers, within, func(ctx context.Context, i int) error {
		if err := do(ctx, i); err != nil {
			return fmt.Errorf("node %s: %w", g.Name(i), err)
		}
		return nil
	})
}

// Each runs do for 0..n-1 on workers goroutines, the i-th not before
// start + i*within/n; it returns the first error, and stops on it.
func Each(ctx context.Context, n, workers int, within time.Duration, do func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := do(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	start := time.Now()
	for i := range n {
		if within > 0 {
			if d := time.Until(start.Add(within * time.Duration(i) / time.Duration(n))); d > 0 {
				time.Sleep(d)
			}
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return first
}
