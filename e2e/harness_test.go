// Package e2e runs renumber's real binaries in the local test world: agents in
// node namespaces doing real SLAAC from real radvd, writers against a real API
// server with the shipped RBAC, every write counted from the audit log.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/tools/world"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds the agent, the writer and kubectl-renumber once per test
// run, from this checkout.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		repo, err := world.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		binDir = filepath.Join(repo, "_out", "e2e-bin")
		for _, cmd := range []string{"agent", "writer", "writer/kubectl-renumber"} {
			if _, err := os.Stat(filepath.Join(repo, cmd)); err != nil {
				continue
			}
			c := exec.Command("go", "build", "-o", filepath.Join(binDir, filepath.Base(cmd)), "./"+cmd)
			c.Dir = repo
			if out, err := c.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("building %s: %v\n%s", cmd, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

type logWriter struct{ t *testing.T }

func (l logWriter) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// newWorld starts a world with CRDs and RBAC installed.
func newWorld(t *testing.T, nodes int) *world.World {
	t.Helper()
	return newWorldWith(t, nodes, true)
}

// newWorldWith starts a world with RBAC installed, and the CRDs when crds is set.
func newWorldWith(t *testing.T, nodes int, crds bool) *world.World {
	t.Helper()
	skipWithoutWorld(t)
	w := startWorld(t, world.Options{Nodes: nodes})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if crds {
		if err := w.API.InstallCRDs(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.API.InstallRBAC(ctx); err != nil {
		t.Fatal(err)
	}
	return w
}

// startWorld starts a world with opts (its log to t), closed at the end of
// the test after dumping its logs if the test failed. Worlds are
// independent (their own namespaces, addresses, ports, API server), so
// their tests run in parallel (go test -parallel); tests with real nodes
// share the machine's containerd mounts and sysctls and stay serial
// (realWorld does not come here).
func startWorld(t *testing.T, opts world.Options) *world.World {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	opts.Log = logWriter{t}
	w, err := world.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, w)
		}
		keepLogs(t, w)
		w.Close()
	})
	return w
}

// keepLogs copies the world's logs to $E2E_LOGS/<test> when E2E_LOGS is set:
// a passing run's journal, to compare with a failing one's.
func keepLogs(t *testing.T, w *world.World) {
	dir := os.Getenv("E2E_LOGS")
	if dir == "" {
		return
	}
	dst := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Log(err)
		return
	}
	files, _ := filepath.Glob(filepath.Join(w.Dir, "*.log"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			_ = os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
		}
	}
}

// skipWithoutWorld skips a real-world test with -short or where no world can run.
func skipWithoutWorld(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("real-world test (skipped with -short)")
	}
	if err := world.Require(); err != nil {
		t.Skipf("test world unavailable: %v", err)
	}
}

func dumpLogs(t *testing.T, w *world.World) {
	dumpState(t, w)
	files, _ := filepath.Glob(filepath.Join(w.Dir, "*.log"))
	for _, f := range files {
		if strings.Contains(f, "kube-apiserver") || strings.Contains(f, "etcd") || strings.HasSuffix(f, "audit.log") {
			continue
		}
		b, _ := os.ReadFile(f)
		// The journal first (what is logged above debug, in full up to a
		// cap), then the tail: the debug lines of a long test push a
		// warning from its start out of any tail.
		var journal []byte
		for _, line := range bytes.SplitAfter(b, []byte("\n")) {
			if bytes.Contains(line, []byte(" DBG")) {
				continue
			}
			if len(journal)+len(line) > 8000 {
				journal = append(journal, "[journal cut at 8000 bytes]\n"...)
				break
			}
			journal = append(journal, line...)
		}
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("==== %s (journal)\n%s==== %s (tail)\n%s", filepath.Base(f), journal, filepath.Base(f), b)
	}
}

// startAgent runs the agent binary in node's namespace with its own identity.
func startAgent(t *testing.T, w *world.World, node string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd, err := w.StartAgent(t.Context(), filepath.Join(binaries(t), "agent"), node, append([]string{"--log-level", "debug"}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// annotation returns the digest annotation on a node.
func annotation(t *testing.T, w *world.World, node string) (string, bool) {
	t.Helper()
	n, err := w.API.Client.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := n.Annotations[digest.Annotation]
	return v, ok
}

// eventually polls cond until it holds or a generous limit passes: for waiting
// on the world, never for asserting how fast it is.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	eventuallyWithin(t, 45*time.Second, what, cond)
}

// eventuallyWithin is eventually with its own limit, for what the world
// itself paces (a DHCPv6 client renewing its lease).
func eventuallyWithin(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("never: %s (last seen: %s)", what, last)
}

// waitDigest waits until node's digest satisfies want.
func waitDigest(t *testing.T, w *world.World, node, what string, want func(digest.Node) bool) string {
	t.Helper()
	var got string
	eventually(t, node+": "+what, func() (bool, string) {
		v, ok := annotation(t, w, node)
		if !ok {
			return false, "no annotation"
		}
		n, err := digest.Decode(v)
		got = v
		return err == nil && want(n), v
	})
	return got
}

func writesBy(t *testing.T, w *world.World, mark world.Mark, user string) []world.Write {
	t.Helper()
	ws, err := w.API.WritesSince(t.Context(), mark)
	if err != nil {
		t.Fatal(err)
	}
	return world.Filter(ws, world.ByUser(user))
}

func mark(t *testing.T, w *world.World) world.Mark {
	t.Helper()
	m, err := w.API.Mark(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// alive reports whether pid runs (not exited, not a zombie waiting to be reaped).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// lastLine returns the last line of a world log file containing one of words.
func lastLine(w *world.World, file string, words []string) string {
	b, _ := os.ReadFile(filepath.Join(w.Dir, file))
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		for _, word := range words {
			if strings.Contains(lines[i], word) {
				return lines[i]
			}
		}
	}
	return ""
}

// minimalDP creates a DynamicPrefix following eth0 with nothing else set.
func minimalDP(t *testing.T, w *world.World, name string) { createDP(t, w, name, nil) }

// createDP creates a DynamicPrefix with the given spec fields; acquisition
// defaults to Router Advertisements on eth0.
func createDP(t *testing.T, w *world.World, name string, spec map[string]any) {
	t.Helper()
	full := map[string]any{"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}}}
	for k, v := range spec {
		full[k] = v
	}
	apply(t, w, api.GVR, map[string]any{
		"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": name},
		"spec":     full,
	})
}

// advertise makes the world's router advertise cur as preferred and the others
// as deprecated, all valid for 10 minutes.
func advertise(t *testing.T, w *world.World, cur netip.Prefix, deprecated ...netip.Prefix) {
	t.Helper()
	ads := []world.Advert{{Prefix: cur, Valid: 600 * time.Second, Preferred: 300 * time.Second}}
	for _, d := range deprecated {
		ads = append(ads, world.Advert{Prefix: d, Valid: 600 * time.Second, Preferred: 0})
	}
	if err := w.Net.Router.Advertise(t.Context(), ads...); err != nil {
		t.Fatal(err)
	}
}

// createPool creates the CiliumLoadBalancerIPPool "lb" following "home",
// with the user's IPv4 block 192.0.2.0/24.
func createPool(t *testing.T, w *world.World) {
	t.Helper()
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}},
	})
}

// haWorld is homeWorld with "home" in transition mode ha and an HA Service
// "web" (suffix ::ffff:0:1) following it.
func haWorld(t *testing.T, nodes int) *world.World {
	t.Helper()
	w := newWorld(t, nodes)
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	createPool(t, w)
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1"})
	return w
}

// homeWorld is the common set-up: a world whose router advertises prefixA, a
// DynamicPrefix "home" following eth0, and a pool "lb" with a user IPv4 block.
func homeWorld(t *testing.T, nodes int) *world.World {
	t.Helper()
	w := newWorld(t, nodes)
	advertise(t, w, prefixA)
	minimalDP(t, w, "home")
	createPool(t, w)
	return w
}

// on is the address of p with the host part of suffix.
func on(t *testing.T, p netip.Prefix, suffix string) string {
	t.Helper()
	a, err := model.Splice(p, netip.MustParseAddr(suffix))
	if err != nil {
		t.Fatal(err)
	}
	return a.String()
}

// dumpState logs what the cluster held when the test failed: each Node's
// digest and each DynamicPrefix's status - whether the agents or the writer
// fell short.
func dumpState(t *testing.T, w *world.World) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if nodes, err := w.API.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			t.Logf("==== node %s digest: %q", n.Name, n.Annotations[digest.Annotation])
		}
	}
	if dps, err := w.API.Dynamic.Resource(api.GVR).List(ctx, metav1.ListOptions{}); err == nil {
		for _, dp := range dps.Items {
			st, _, _ := unstructured.NestedMap(dp.Object, "status")
			b, _ := json.Marshal(st)
			t.Logf("==== DynamicPrefix %s status: %s", dp.GetName(), b)
		}
	}
}
