// Command demo runs renumber's main job in a local world on this machine: a real
// API server, a router sending real RAs, three nodes doing SLAAC, an agent on
// each and two writers. It fills a Cilium pool from the advertised prefix,
// renumbers at the router, shows the pool follow, counts every write, and
// cleans up. `make demo` runs it.
package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/renumber/renumber/tools/world"
)

var (
	prefixA = netip.MustParsePrefix("2001:db8:1:100::/64")
	prefixB = netip.MustParsePrefix("2001:db8:2:200::/64")
	dpGVR   = schema.GroupVersionResource{Group: "dynamic-prefix.io", Version: "v1alpha1", Resource: "dynamicprefixes"}
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("\n\033[1m==> "+format+"\033[0m\n", args...) }
func say(format string, args ...any)  { fmt.Printf("    "+format+"\n", args...) }

func run(ctx context.Context) error {
	if err := world.Require(); err != nil {
		return err
	}
	step("Starting a local world: etcd, kube-apiserver, a radvd router, 3 node namespaces")
	start := time.Now()
	w, err := world.Start(ctx, world.Options{Nodes: 3})
	if err != nil {
		return err
	}
	defer func() {
		step("Cleaning up")
		w.Close()
		say("world %s torn down", w.ID)
	}()
	if err := w.API.InstallCRDs(ctx); err != nil {
		return err
	}
	if err := w.API.InstallRBAC(ctx); err != nil {
		return err
	}
	say("ready in %s; API server %s", time.Since(start).Round(100*time.Millisecond), w.API.URL)

	step("The router advertises %s", prefixA)
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixA, Valid: 30 * time.Minute, Preferred: 20 * time.Minute}); err != nil {
		return err
	}

	step("Creating DynamicPrefix \"home\" and CiliumLoadBalancerIPPool \"lb\" (with a user IPv4 block)")
	repo, _ := world.RepoRoot()
	if err := w.API.Apply(ctx, filepath.Join(repo, "manifests", "examples", "home.yaml")); err != nil {
		return err
	}
	printPool(ctx, w)

	step("Starting an agent in each node and two writers (each with its own RBAC identity)")
	agentBin, err := world.Bin("agent")
	if err != nil {
		return err
	}
	writerBin, err := world.Bin("writer")
	if err != nil {
		return err
	}
	if _, err := w.StartAll(ctx, agentBin, writerBin, nil, "writer-a", "writer-b"); err != nil {
		return err
	}
	if err := waitPool(ctx, w, world.RangeOf(prefixA.String()), time.Minute); err != nil {
		return err
	}
	say("the pool follows %s:", prefixA)
	printPool(ctx, w)

	step("Quiet: 15 s with RAs every 3-4 s")
	time.Sleep(2 * time.Second)
	m, err := w.API.Mark(ctx)
	if err != nil {
		return err
	}
	time.Sleep(15 * time.Second)
	quiet, err := w.API.WritesSince(ctx, m)
	if err != nil {
		return err
	}
	printWrites(quiet)

	step("Renumbering at the router: %s preferred, %s deprecated", prefixB, prefixA)
	m, err = w.API.Mark(ctx)
	if err != nil {
		return err
	}
	watcher, err := w.API.Dynamic.Resource(world.PoolGVR).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=lb"})
	if err != nil {
		return err
	}
	defer watcher.Stop()
	if err := w.Net.Router.Advertise(ctx,
		world.Advert{Prefix: prefixB, Valid: 30 * time.Minute, Preferred: 20 * time.Minute},
		world.Advert{Prefix: prefixA, Valid: 10 * time.Minute, Preferred: 0},
	); err != nil {
		return err
	}
	latency, err := watchFor(ctx, watcher, world.RangeOf(prefixB.String()), time.Minute)
	if err != nil {
		return err
	}
	say("the pool holds the new block %s after the router's change", latency.Round(time.Millisecond))
	time.Sleep(5 * time.Second) // let every node's agent and the writers finish
	printPool(ctx, w)
	printStatus(ctx, w)

	step("Writes made by the change (from the API server's audit log)")
	change, err := w.API.WritesSince(ctx, m)
	if err != nil {
		return err
	}
	printWrites(change)
	fmt.Printf("\n\033[1mDone.\033[0m Logs of this run were in %s while it ran; `make world-up` keeps a world to explore.\n", w.Dir)
	return nil
}

func printPool(ctx context.Context, w *world.World) {
	u, err := w.API.Dynamic.Resource(world.PoolGVR).Get(ctx, "lb", metav1.GetOptions{})
	if err != nil {
		say("pool: %v", err)
		return
	}
	say("CiliumLoadBalancerIPPool lb, spec.blocks:")
	for _, b := range world.Blocks(u) {
		say("  - %s", b)
	}
}

func printStatus(ctx context.Context, w *world.World) {
	u, err := w.API.Dynamic.Resource(dpGVR).Get(ctx, "home", metav1.GetOptions{})
	if err != nil {
		return
	}
	cur, _, _ := unstructured.NestedString(u.Object, "status", "currentPrefix")
	say("DynamicPrefix home: currentPrefix %s", cur)
	hist, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
	for _, h := range hist {
		m := h.(map[string]any)
		say("  history: %-22v %v", m["prefix"], m["state"])
	}
}

func waitPool(ctx context.Context, w *world.World, block string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if u, err := w.API.Dynamic.Resource(world.PoolGVR).Get(ctx, "lb", metav1.GetOptions{}); err == nil && slices.Contains(world.Blocks(u), block) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the pool never received %s (logs in %s)", block, w.Dir)
}

func watchFor(ctx context.Context, wt watch.Interface, block string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	timeout := time.After(limit)
	for {
		select {
		case ev := <-wt.ResultChan():
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && slices.Contains(world.Blocks(u), block) {
				return time.Since(start), nil
			}
		case <-timeout:
			return 0, fmt.Errorf("the pool never received %s", block)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func printWrites(ws []world.Write) {
	counts := map[string]int{}
	var keys []string
	for _, w := range ws {
		who := strings.TrimPrefix(w.User, "system:serviceaccount:renumber-system:")
		if who == "world-admin" {
			continue
		}
		res := w.Resource
		if w.Subresource != "" {
			res += "/" + w.Subresource
		}
		k := fmt.Sprintf("%-16s %-6s %s", who, w.Verb, res)
		if counts[k] == 0 {
			keys = append(keys, k)
		}
		counts[k]++
	}
	if len(keys) == 0 {
		say("no writes at all")
		return
	}
	slices.Sort(keys)
	for _, k := range keys {
		say("%3d  %s", counts[k], k)
	}
}
