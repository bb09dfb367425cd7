package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/tools/world"
)

// hugePolicy is a NetworkPolicy name in default following home: a rule
// admitting p, then rules of pod selectors up to about size bytes of JSON -
// what a tenant allowed to create NetworkPolicies in one namespace can make.
// (Peers of three small maps each: about 14 bytes of heap per byte of JSON
// once decoded into maps. Many more peers and the admission policy's CEL
// cost limit refuses the writer's write: see the report of issue 42.)
func hugePolicy(name string, p fmt.Stringer, size int) map[string]any {
	ingress := []any{map[string]any{"from": []any{map[string]any{"ipBlock": map[string]any{"cidr": p.String()}}}}}
	peers := make([]any, 1000)
	bytes := 0
	for i := range peers {
		labels := map[string]any{"app": fmt.Sprintf("app-%d", i), "tier": "web", "team": "tenant"}
		peers[i] = map[string]any{"podSelector": map[string]any{"matchLabels": labels}}
		bytes += len(`{"podSelector":{"matchLabels":{"app":"app-000","tier":"web","team":"tenant"}}},`)
	}
	for n := 0; n < size; n += bytes {
		ingress = append(ingress, map[string]any{"from": peers, "ports": []any{map[string]any{"port": int64(443)}}})
	}
	return map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": name, "namespace": "default", "annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec":     map[string]any{"podSelector": map[string]any{}, "ingress": ingress},
	}
}

// shippedWriterLimit is the writer container's memory limit in
// manifests/writer/deployment.yaml, in bytes.
func shippedWriterLimit(t *testing.T) int64 {
	t.Helper()
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(repo, "manifests", "writer", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "writer" {
			if q, ok := c.Resources.Limits["memory"]; ok {
				return q.Value()
			}
		}
	}
	t.Fatal("the writer container has no memory limit")
	return 0
}

// confine puts pid in a memory cgroup of its own limited to limit bytes, as
// the writer's container is (cgroup v1; skipped where there is none); the
// kernel kills it past the limit. It returns what reads the cgroup's peak
// usage, in bytes.
func confine(t *testing.T, pid int, limit int64) func() int64 {
	t.Helper()
	root := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(root, "memory.limit_in_bytes")); err != nil {
		t.Skipf("no cgroup v1 memory controller: %v", err)
	}
	dir := filepath.Join(root, fmt.Sprintf("renumber-e2e-writer-%d", pid))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Back to the root before the world ends it, so the cgroup can go.
		_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		_ = os.Remove(dir)
	})
	// What it holds already would count with move_charge_at_immigrate,
	// which kernels since 6.x refuse; a writer just started holds little.
	for _, f := range []struct{ name, value string }{
		{"memory.limit_in_bytes", strconv.FormatInt(limit, 10)},
		{"cgroup.procs", strconv.Itoa(pid)},
	} {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.value), 0o644); err != nil {
			t.Fatalf("cgroup %s: %v", f.name, err)
		}
	}
	return func() int64 {
		b, _ := os.ReadFile(filepath.Join(dir, "memory.max_usage_in_bytes"))
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
}

// rss reads VmRSS and VmHWM (the peak) of pid from /proc, in KiB.
func rss(pid int) (now, peak int64) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			now = n
		case "VmHWM":
			peak = n
		}
	}
	return now, peak
}

// TestATenantsHugePoliciesDoNotExhaustTheWriter: a tenant creates eight
// NetworkPolicies of about 700 KiB, each following home (a rule admitting
// the prefix, then thousands of pod selectors). The writer, confined to its
// container's memory limit with its shipped GOMEMLIMIT, follows them all -
// one write each to claim its block, then one per renumbering, their rules
// untouched - and stays alive: it caches of each only its blocks. (Kept
// whole, eight such policies took it past 128 MiB.)
func TestATenantsHugePoliciesDoNotExhaustTheWriter(t *testing.T) {
	w := newWorld(t, 1)
	env, err := world.ShippedWriterEnv()
	if err != nil {
		t.Fatal(err)
	}
	w.WriterEnv = env
	advertise(t, w, prefixA)
	createDP(t, w, "home", nil)
	createPool(t, w)
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%d", i)
		apply(t, w, networkPolicyGVR, hugePolicy(names[i], prefixA, 700<<10))
	}
	rules := len(getIn(t, w, networkPolicyGVR, "default", names[0]).Object["spec"].(map[string]any)["ingress"].([]any))

	startAgent(t, w, "node1")
	addr := freeAddr(t)
	writer := startWriter(t, w, "writer-a", "--metrics-addr", addr)
	peak := confine(t, writer.Process.Pid, shippedWriterLimit(t))

	living := func() {
		t.Helper()
		if !alive(writer.Process.Pid) {
			t.Fatalf("the writer died: its cgroup's peak %d MiB, limit %d MiB", peak()>>20, shippedWriterLimit(t)>>20)
		}
	}
	// follows: every policy's first rule holds exactly want, its other rules
	// are the tenant's still, and the writer is alive.
	follows := func(want ...string) {
		t.Helper()
		eventually(t, fmt.Sprintf("every policy follows %v", want), func() (bool, string) {
			living()
			for _, name := range names {
				u := getIn(t, w, networkPolicyGVR, "default", name)
				ingress, _, _ := unstructured.NestedSlice(u.Object, "spec", "ingress")
				var got []string
				from, _, _ := unstructured.NestedSlice(ingress[0].(map[string]any), "from")
				for _, p := range from {
					c, _, _ := unstructured.NestedString(p.(map[string]any), "ipBlock", "cidr")
					got = append(got, c)
				}
				if !slices.Equal(got, want) || len(ingress) != rules {
					return false, fmt.Sprintf("%s: %v in its first rule, %d rules", name, got, len(ingress))
				}
			}
			return true, ""
		})
	}
	follows(prefixA.String())
	eventually(t, "the policies carry the record", func() (bool, string) {
		living()
		for _, name := range names {
			if r := getIn(t, w, networkPolicyGVR, "default", name).GetAnnotations()[dynamicprefix.AnnotationManagedCIDRs]; r != prefixA.String() {
				return false, name + ": " + r
			}
		}
		return true, ""
	})
	settleWrites()
	now, hwm := rss(writer.Process.Pid)
	t.Logf("after following eight 700 KiB policies: writer RSS %d KiB (peak %d KiB), heap in use %.1f MiB, cgroup peak %d MiB of %d MiB",
		now, hwm, writerMetric(addr, "go_memstats_heap_inuse_bytes")/(1<<20), peak()>>20, shippedWriterLimit(t)>>20)

	m := mark(t, w)
	advertise(t, w, prefixB, prefixA)
	follows(prefixB.String(), prefixA.String())
	settleWrites()
	want := []string{"patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200"}
	for _, name := range names {
		want = append(want, "patch networkpolicies "+name+" 200")
	}
	slices.Sort(want)
	if got := objectWrites(writesBy(t, w, m, writerUser)); !slices.Equal(got, want) {
		t.Errorf("renumbering wrote %q, want %q (one write per object)", got, want)
	}
	now, hwm = rss(writer.Process.Pid)
	t.Logf("after the renumbering: writer RSS %d KiB (peak %d KiB), heap in use %.1f MiB, cgroup peak %d MiB",
		now, hwm, writerMetric(addr, "go_memstats_heap_inuse_bytes")/(1<<20), peak()>>20)
}
