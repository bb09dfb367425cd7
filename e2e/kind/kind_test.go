//go:build kind

package kind

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

const (
	agentUser  = "system:serviceaccount:renumber-system:renumber-agent"
	writerUser = "system:serviceaccount:renumber-system:renumber-writer"
	auditLog   = "/var/log/kubernetes/audit/audit.log"
)

var (
	prefixA = netip.MustParsePrefix("2001:db8:1:100::/64") // e2e/kind/radvd.conf
	prefixB = netip.MustParsePrefix("2001:db8:2:200::/64")
	// Every prefix the scenarios move to is inside the allowlist; the rogue's is not.
	allowed = "2001:db8::/36"
	foreign = netip.MustParsePrefix("2001:db8:f00d::/64")
	poolGVR = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumloadbalancerippools"}
)

type cluster struct {
	name, router string
	client       kubernetes.Interface
	dynamic      dynamic.Interface
}

func connect(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{name: os.Getenv("E2E_KIND_CLUSTER"), router: os.Getenv("E2E_KIND_ROUTER")}
	if c.name == "" || c.router == "" {
		t.Skip("run by e2e/kind/run.sh (make e2e-kind)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if c.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

func docker(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command("docker", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func kubectl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("kubectl", args...).CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// advertise reconfigures the router container and reloads radvd, as the local
// world's Router.Advertise does, with the same configuration generator.
func (c *cluster) advertise(t *testing.T, ads ...world.Advert) {
	t.Helper()
	docker(t, []byte(world.RadvdConf(ads, nil)), "exec", "-i", c.router, "sh", "-c", "cat > /etc/radvd/radvd.conf && radvd -c -C /etc/radvd/radvd.conf")
	docker(t, nil, "kill", "-s", "HUP", c.router)
}

// mark is a position in the control plane's audit log.
type mark int

func (c *cluster) mark(t *testing.T) mark {
	t.Helper()
	time.Sleep(4 * time.Second) // earlier requests' events are written
	var n int
	fmt.Sscan(docker(t, nil, "exec", c.name+"-control-plane", "stat", "-c", "%s", auditLog), &n)
	return mark(n)
}

func (c *cluster) writesSince(t *testing.T, m mark) []world.Write {
	t.Helper()
	time.Sleep(4 * time.Second)
	out := docker(t, nil, "exec", c.name+"-control-plane", "tail", "-c", fmt.Sprintf("+%d", int(m)+1), auditLog)
	ws, err := world.ParseAudit(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(time.Second)
	}
	t.Fatalf("never: %s (last seen: %s)", what, last)
}

func (c *cluster) blocks(t *testing.T) []string {
	t.Helper()
	u, err := c.dynamic.Resource(poolGVR).Get(context.Background(), "lb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return world.Blocks(u)
}

// quietAcross fails t if the writer or an agent wrote any object (Leases and
// Events aside) in ws, written during what.
func quietAcross(t *testing.T, ws []world.Write, what string) {
	t.Helper()
	for _, user := range []string{writerUser, agentUser} {
		if got := objectWrites(ws, user); len(got) != 0 {
			t.Errorf("%s wrote during %s: %q", user, what, got)
		}
	}
}

// restartedAt is the patch `kubectl rollout restart` makes.
func restartedAt() []byte {
	return fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339))
}

func objectWrites(ws []world.Write, user string) []string {
	var out []string
	for _, w := range ws {
		if w.User == user && w.Resource != "leases" && w.Resource != "events" {
			res := w.Resource
			if w.Subresource != "" {
				res += "/" + w.Subresource
			}
			out = append(out, fmt.Sprintf("%s %s %s %d", w.Verb, res, w.Name, w.Code))
		}
	}
	slices.Sort(out)
	return out
}

// TestScenarios runs the e2e list in order on one cluster, all but 8: taking a
// kind node's eth0 down removes the default route Docker installed, which
// nothing puts back, so the node would not come back.
func TestScenarios(t *testing.T) {
	c := connect(t)
	ctx := t.Context()
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []map[string]any{
		{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix", "metadata": map[string]any{"name": "home"},
			"spec": map[string]any{"acquisition": map[string]any{
				"routerAdvertisement": map[string]any{"interface": "eth0"},
				"prefixFilter":        map[string]any{"allowedPrefixes": []any{allowed}}}}},
	} {
		if _, err := c.dynamic.Resource(api.GVR).Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pool := map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}}}
	if _, err := c.dynamic.Resource(poolGVR).Create(ctx, &unstructured.Unstructured{Object: pool}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	lease := func(t *testing.T) (string, int32) {
		t.Helper()
		l, err := c.client.CoordinationV1().Leases("renumber-system").Get(ctx, "renumber-writer", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			t.Fatalf("lease: %v", err)
		}
		return *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions
	}

	t.Run("1 install: pools converge from the first RA", func(t *testing.T) {
		eventually(t, "pool follows A", func() (bool, string) {
			b := c.blocks(t)
			return slices.Equal(b, []string{"192.0.2.0/24", prefixA.String()}), fmt.Sprint(b)
		})
	})

	t.Run("2 quiet: only the leader's Lease renewals", func(t *testing.T) {
		quiet := 5 * time.Minute
		if d, err := time.ParseDuration(os.Getenv("E2E_KIND_QUIET")); err == nil {
			quiet = d
		}
		m := c.mark(t)
		time.Sleep(quiet)
		renewals := 0
		for _, w := range c.writesSince(t, m) {
			switch {
			case w.User == writerUser && w.Resource == "leases":
				renewals++
			case w.User == writerUser || w.User == agentUser:
				t.Errorf("write at steady state: %s", w)
			}
		}
		if want := int(quiet / (5 * time.Second)); renewals < want-2 || renewals > want+1 {
			t.Errorf("%d Lease renewals in %s, want about %d (one per 5 s retry period)", renewals, quiet, want)
		}
	})

	t.Run("3 prefix change: minimal writes", func(t *testing.T) {
		m := c.mark(t)
		c.advertise(t, world.Advert{Prefix: prefixB, Valid: 600 * time.Second, Preferred: 300 * time.Second},
			world.Advert{Prefix: prefixA, Valid: 600 * time.Second, Preferred: 0})
		eventually(t, "pool follows B, A draining", func() (bool, string) {
			b := c.blocks(t)
			return slices.Equal(b, []string{"192.0.2.0/24", prefixB.String(), prefixA.String()}), fmt.Sprint(b)
		})
		ws := c.writesSince(t, m)
		perNode := map[string]int{}
		for _, w := range ws {
			if w.User == agentUser {
				perNode[w.Name]++
			}
		}
		for _, n := range nodes.Items {
			if perNode[n.Name] != 1 {
				t.Errorf("node %s: %d digest writes for one change, want 1", n.Name, perNode[n.Name])
			}
		}
		want := []string{"patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200"}
		if got := objectWrites(ws, writerUser); !slices.Equal(got, want) {
			t.Errorf("writer writes %q, want %q", got, want)
		}
	})

	t.Run("4 agent restart, writer rolling restart: no writes beyond the Lease", func(t *testing.T) {
		m := c.mark(t)
		pods, err := c.client.CoreV1().Pods("renumber-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=renumber-agent"})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("agent pods: %v", err)
		}
		if err := c.client.CoreV1().Pods("renumber-system").Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.client.AppsV1().Deployments("renumber-system").Patch(ctx, "renumber-writer", types.StrategicMergePatchType, restartedAt(), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "rollout done", func() (bool, string) {
			d, err := c.client.AppsV1().Deployments("renumber-system").Get(ctx, "renumber-writer", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ds, err := c.client.AppsV1().DaemonSets("renumber-system").Get(ctx, "renumber-agent", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas &&
				ds.Status.NumberReady == ds.Status.DesiredNumberScheduled, fmt.Sprintf("%+v", d.Status)
		})
		time.Sleep(30 * time.Second) // the new pods have settled
		quietAcross(t, c.writesSince(t, m), "an agent restart and a writer rollout")
	})

	t.Run("4 DaemonSet rollout: every agent replaced, no object write", func(t *testing.T) {
		m := c.mark(t)
		if _, err := c.client.AppsV1().DaemonSets("renumber-system").Patch(ctx, "renumber-agent", types.StrategicMergePatchType, restartedAt(), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "agent rollout done", func() (bool, string) {
			ds, err := c.client.AppsV1().DaemonSets("renumber-system").Get(ctx, "renumber-agent", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			s := ds.Status
			return s.ObservedGeneration == ds.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
				s.NumberAvailable == s.DesiredNumberScheduled, fmt.Sprintf("%+v", s)
		})
		time.Sleep(30 * time.Second) // the new agents have read their uplinks
		quietAcross(t, c.writesSince(t, m), "the agents' rollout")
	})

	t.Run("4 node drained: the writer moves, no object write", func(t *testing.T) {
		leader, _ := lease(t)
		pod, err := c.client.CoreV1().Pods("renumber-system").Get(ctx, leader, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node := pod.Spec.NodeName
		m := c.mark(t)
		kubectl(t, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=180s")
		t.Cleanup(func() { kubectl(t, "uncordon", node) })
		eventually(t, "writer available again off "+node, func() (bool, string) {
			d, err := c.client.AppsV1().Deployments("renumber-system").Get(ctx, "renumber-writer", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return d.Status.AvailableReplicas == *d.Spec.Replicas, fmt.Sprintf("%+v", d.Status)
		})
		if now, _ := lease(t); now == leader {
			t.Errorf("the drained %s still holds the lease", leader)
		}
		kubectl(t, "uncordon", node)
		time.Sleep(10 * time.Second)
		quietAcross(t, c.writesSince(t, m), "the drain")
	})

	t.Run("10 garbled digest: ignored, event, others unaffected", func(t *testing.T) {
		m := c.mark(t)
		node := nodes.Items[len(nodes.Items)-1].Name
		patch := []byte(`{"metadata":{"annotations":{"` + digest.Annotation + `":"v1;eth0=::/0 p ra;<script>"}}}`)
		if _, err := c.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "InvalidDigest event", func() (bool, string) {
			evs, err := c.client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, e := range evs.Items {
				if e.Reason == "InvalidDigest" && e.Regarding.Name == node {
					return true, ""
				}
			}
			return false, ""
		})
		if got := objectWrites(c.writesSince(t, m), writerUser); len(got) != 0 {
			t.Errorf("a garbled digest caused writes: %q", got)
		}
		if b := c.blocks(t); !slices.Contains(b, prefixB.String()) {
			t.Errorf("pool lost the current prefix: %v", b)
		}
	})

	// renumber moves the router to p (the previous prefix deprecated) inside
	// around, and checks that the pool gets it with exactly one pool patch and one
	// status patch.
	prev := prefixB
	renumber := func(t *testing.T, m mark, p netip.Prefix, around func(advertise func())) {
		t.Helper()
		around(func() {
			c.advertise(t, world.Advert{Prefix: p, Valid: 600 * time.Second, Preferred: 300 * time.Second},
				world.Advert{Prefix: prev, Valid: 600 * time.Second, Preferred: 0})
		})
		eventually(t, "pool follows "+p.String(), func() (bool, string) {
			b := c.blocks(t)
			return len(b) > 1 && b[1] == p.String(), fmt.Sprint(b)
		})
		want := []string{"patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200"}
		if got := objectWrites(c.writesSince(t, m), writerUser); !slices.Equal(got, want) {
			t.Errorf("writer writes for the change to %s: %q, want %q", p, got, want)
		}
		prev = p
	}
	restarts := func(t *testing.T) int32 {
		t.Helper()
		pods, err := c.client.CoreV1().Pods("renumber-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var n int32
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				n += cs.RestartCount
			}
		}
		return n
	}
	// stall freezes the control plane's container (API server, etcd and all) for
	// d, with the router changing the prefix meanwhile.
	stall := func(t *testing.T, d time.Duration) func(func()) {
		return func(advertise func()) {
			docker(t, nil, "pause", c.name+"-control-plane")
			advertise()
			time.Sleep(d)
			docker(t, nil, "unpause", c.name+"-control-plane")
		}
	}

	t.Run("4 leader killed: the standby applies a change made meanwhile, once", func(t *testing.T) {
		leader, _ := lease(t)
		m := c.mark(t)
		renumber(t, m, netip.MustParsePrefix("2001:db8:3:300::/64"), func(advertise func()) {
			zero := int64(0)
			if err := c.client.CoreV1().Pods("renumber-system").Delete(ctx, leader, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
			advertise()
		})
		if now, _ := lease(t); now == leader {
			t.Errorf("the killed %s still holds the lease", leader)
		}
	})

	t.Run("9 a rogue RA reaching one node: not adopted, event", func(t *testing.T) {
		worker := c.name + "-worker"
		var ll string
		for _, f := range strings.Fields(docker(t, nil, "exec", worker, "ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "link")) {
			if strings.HasPrefix(f, "fe80::") {
				ll = strings.Split(f, "/")[0]
			}
		}
		if ll == "" {
			t.Fatal("no link-local address on the worker")
		}
		conf := world.RadvdConf([]world.Advert{{Prefix: foreign, Valid: 600 * time.Second, Preferred: 300 * time.Second}}, []netip.Addr{netip.MustParseAddr(ll)})
		rogue := c.router + "-rogue"
		docker(t, nil, "run", "-d", "--name", rogue, "--network", "kind", "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW",
			"--sysctl", "net.ipv6.conf.all.forwarding=1", "renumber/e2e-router:dev", "sleep", "infinity")
		t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", rogue).Run() })
		m := c.mark(t)
		docker(t, []byte(conf), "exec", "-i", rogue, "sh", "-c", "cat > /etc/radvd/radvd.conf")
		docker(t, nil, "exec", "-d", rogue, "radvd", "-n", "-C", "/etc/radvd/radvd.conf")
		eventually(t, "PrefixRejected event", func() (bool, string) {
			evs, err := c.client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, e := range evs.Items {
				if e.Reason == "PrefixRejected" && e.Regarding.Name == "home" {
					return true, ""
				}
			}
			return false, ""
		})
		if got := objectWrites(c.writesSince(t, m), writerUser); len(got) != 0 {
			t.Errorf("the rogue prefix caused writes: %q", got)
		}
		docker(t, nil, "rm", "-f", rogue)
	})

	t.Run("7 etcd restarted under the API server: a change made meanwhile lands", func(t *testing.T) {
		m := c.mark(t)
		renumber(t, m, netip.MustParsePrefix("2001:db8:4:400::/64"), func(advertise func()) {
			// The node image has no crictl (not served by the module proxy):
			// killing etcd's process has the kubelet restart its container.
			docker(t, nil, "exec", c.name+"-control-plane", "pkill", "-x", "etcd")
			advertise()
		})
	})

	t.Run("5 API server stalled 30 s: the lease is kept, nothing restarts, the change lands", func(t *testing.T) {
		holder, transitions := lease(t)
		before := restarts(t)
		m := c.mark(t)
		renumber(t, m, netip.MustParsePrefix("2001:db8:5:500::/64"), stall(t, 30*time.Second))
		if h, tr := lease(t); h != holder || tr != transitions {
			t.Errorf("lease moved: %s (%d) -> %s (%d)", holder, transitions, h, tr)
		}
		if after := restarts(t); after != before {
			t.Errorf("containers restarted: %d -> %d", before, after)
		}
	})

	t.Run("6 API server stalled 90 s: lease lost, no restart, one leader, converged", func(t *testing.T) {
		before := restarts(t)
		m := c.mark(t)
		renumber(t, m, netip.MustParsePrefix("2001:db8:6:600::/64"), stall(t, 90*time.Second))
		if after := restarts(t); after != before {
			t.Errorf("containers restarted: %d -> %d (losing the lease must not exit)", before, after)
		}
		lease(t) // one holder
	})
}
