package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/tools/world"
)

// hugePolicy is a NetworkPolicy name in namespace ns following home: a rule
// admitting p, then rules of pod selectors up to about size bytes of JSON -
// what a tenant allowed to create NetworkPolicies in one namespace can make.
// (Peers of three small maps each: about 14 bytes of heap per byte of JSON
// once decoded into maps. Many more peers and the admission policy's CEL
// cost limit refuses the writer's write: see the report of issue 42.)
func hugePolicy(name, ns string, p fmt.Stringer, size int) map[string]any {
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
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec":     map[string]any{"podSelector": map[string]any{}, "ingress": ingress},
	}
}

// blockPolicy is a NetworkPolicy name in namespace ns following home whose
// one rule admits n /24s: over what the writer keeps of an object
// (backends.MaxKeptBytes) for n past about 2,000.
func blockPolicy(name, ns string, n int) map[string]any {
	peers := make([]any, n)
	for i := range peers {
		peers[i] = map[string]any{"ipBlock": map[string]any{"cidr": fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)}}
	}
	return map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec":     map[string]any{"podSelector": map[string]any{}, "ingress": []any{map[string]any{"from": peers}}},
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

// TestATenantsHugePoliciesDoNotExhaustTheWriter: a tenant - a ServiceAccount
// whose Role lets it create NetworkPolicies in its own namespace, nothing
// more - creates eight NetworkPolicies of about 700 KiB, each following home
// (a rule admitting the prefix, then thousands of pod selectors), and a
// ninth of 20,000 ipBlocks. The writer, confined to its container's memory
// limit with its shipped GOMEMLIMIT, follows the eight - one write each to
// claim its block, then one per renumbering, their rules untouched - leaves
// the ninth alone with an event (over the 64 KiB it keeps of an object), and
// stays alive: it caches of each only its blocks, at most 64 KiB. (Kept
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
	tn := newTenant(t, w, "tenant")
	create := func(obj map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: obj}
		if _, err := tn.dyn.Resource(networkPolicyGVR).Namespace(tn.ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the tenant creating %s: %v", u.GetName(), err)
		}
	}
	m0 := mark(t, w)
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%d", i)
		create(hugePolicy(names[i], tn.ns, prefixA, 700<<10))
	}
	create(blockPolicy("tenant-blocks", tn.ns, 20000))
	if got := len(writesBy(t, w, m0, tn.user)); got != len(names)+1 {
		t.Errorf("the audit log has %d writes by %s, want its %d policies", got, tn.user, len(names)+1)
	}
	rules := len(getIn(t, w, networkPolicyGVR, tn.ns, names[0]).Object["spec"].(map[string]any)["ingress"].([]any))

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
	// are the tenant's still, and the writer is alive. Each 700 KiB patch
	// took 5-10 s under make test's load (eight in a row outlast eventually's
	// 45 s): this test is about memory, so the wait is the load's.
	follows := func(want ...string) {
		t.Helper()
		eventuallyWithin(t, 3*time.Minute, fmt.Sprintf("every policy follows %v", want), func() (bool, string) {
			living()
			for _, name := range names {
				u := getIn(t, w, networkPolicyGVR, tn.ns, name)
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
	// The policies were created holding A: the record is what the writer
	// writes, one 700 KiB patch after another (the same wait as follows).
	eventuallyWithin(t, 3*time.Minute, "the policies carry the record", func() (bool, string) {
		living()
		for _, name := range names {
			if r := getIn(t, w, networkPolicyGVR, tn.ns, name).GetAnnotations()[dynamicprefix.AnnotationManagedCIDRs]; r != prefixA.String() {
				return false, name + ": " + r
			}
		}
		return true, ""
	})
	if msg := eventMessage(t, w, "InvalidPool", "tenant-blocks"); !strings.Contains(msg, backends.ErrTooLarge.Error()) {
		t.Errorf("the event on the policy of 20,000 ipBlocks says %q, want %q", msg, backends.ErrTooLarge)
	}
	settleWrites()
	for _, wr := range objectWrites(writesBy(t, w, m0, writerUser)) {
		if strings.Contains(wr, " tenant-blocks ") {
			t.Errorf("the writer wrote the policy it cannot keep: %s", wr)
		}
	}
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
