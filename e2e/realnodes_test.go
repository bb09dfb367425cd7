package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// Real nodes: kubelet + containerd + runc in the world's node namespaces run
// the shipped install unchanged - the agent DaemonSet and the writer
// Deployment as Pods from the images `make images` builds, with the Pods' own
// ServiceAccount tokens, the shipped securityContext and probes. Writes are
// counted from the audit log by those identities.

const rolloutLimit = 3 * time.Minute

// realNodesTests begins the name of every test with real nodes. They share the
// machine's containerd mounts and sysctls, and make test runs them alone
// before the world tests, which run beside each other (and beside kind's
// builds at the lowest priority).
const realNodesTests = "TestRealNodes"

// realWorld starts a world of real nodes with Cilium's CRDs, installed with
// install ("kustomize" or "helm"), a DynamicPrefix "home" and the pool "lb"
// following it. The router is silent until the test advertises.
func realWorld(t *testing.T, nodes int, install string, sets ...string) *world.World {
	t.Helper()
	if !strings.HasPrefix(t.Name(), realNodesTests) {
		t.Fatalf("%s starts real nodes: its name must begin with %s (make test runs those alone, then the world tests beside each other: -run/-skip '^%s')",
			t.Name(), realNodesTests, realNodesTests)
	}
	skipWithoutWorld(t)
	if err := world.RequireKubelets(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("real nodes missing in CI: make test builds them (make node-tools images node-images): %v", err)
		}
		t.Skipf("real nodes unavailable: %v", err)
	}
	if install == "helm" {
		helmBin(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	w, err := world.Start(ctx, world.Options{Nodes: nodes, Kubelets: true, Log: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpPods(t, w)
			dumpLogs(t, w)
		}
		w.Close()
	})
	if err := w.Install(ctx, install, sets...); err != nil {
		t.Fatal(err)
	}
	minimalDP(t, w, "home")
	createPool(t, w)
	if err := w.WaitInstalled(t.Context(), rolloutLimit); err != nil {
		t.Fatal(err)
	}
	return w
}

// leaderPod is the writer Pod holding the Lease.
func leaderPod(t *testing.T, w *world.World) string {
	t.Helper()
	var holder string
	eventually(t, "a writer Pod leads", func() (bool, string) {
		l, err := w.API.Client.CoordinationV1().Leases(world.Namespace).Get(t.Context(), "renumber-writer", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false, fmt.Sprint(err)
		}
		holder = *l.Spec.HolderIdentity
		return true, ""
	})
	return holder
}

// pods lists the Pods of the named app.
func pods(t *testing.T, w *world.World, app string) []corev1.Pod {
	t.Helper()
	l, err := w.API.Client.CoreV1().Pods(world.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func dumpPods(t *testing.T, w *world.World) {
	l, err := w.API.Client.CoreV1().Pods(world.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("pods: %v", err)
		return
	}
	for _, p := range l.Items {
		var cs []string
		for _, c := range p.Status.ContainerStatuses {
			s := fmt.Sprintf("%s ready=%v restarts=%d", c.Name, c.Ready, c.RestartCount)
			if c.State.Waiting != nil {
				s += " waiting " + c.State.Waiting.Reason + ": " + c.State.Waiting.Message
			}
			if c.LastTerminationState.Terminated != nil {
				s += " last exit: " + c.LastTerminationState.Terminated.Reason + " " + c.LastTerminationState.Terminated.Message
			}
			cs = append(cs, s)
		}
		t.Logf("pod %s on %s: %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, cs)
	}
}

// quietFor asserts that for d nothing of ours writes but the leader renewing
// its Lease once per 5 s retry period (the shipped timings), and no Pod of
// ours logs a line (the shipped log level is info: nothing at steady state).
func quietFor(t *testing.T, w *world.World, d time.Duration) {
	t.Helper()
	m := mark(t, w)
	since := metav1.Now()
	time.Sleep(d)
	for _, app := range []string{"renumber-agent", "renumber-writer"} {
		for _, p := range pods(t, w, app) {
			b, err := w.API.Client.CoreV1().Pods(world.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{SinceTime: &since}).DoRaw(t.Context())
			if err != nil {
				t.Fatalf("logs of %s: %v", p.Name, err)
			}
			if len(b) > 0 {
				t.Errorf("%s logged in a quiet period:\n%s", p.Name, b)
			}
		}
	}
	ws, err := w.API.WritesSince(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	renewals := 0
	for _, wr := range ws {
		switch {
		case wr.User == writerUser && wr.Resource == "leases" && wr.Verb == "update":
			renewals++
		case wr.User == writerUser || wr.User == agentUser:
			t.Errorf("write in a quiet period: %s", wr)
		}
	}
	want := int(d / (5 * time.Second))
	if renewals < want-2 || renewals > want+1 {
		t.Errorf("%d Lease renewals in %s with a 5 s retry period, want %d", renewals, d, want)
	}
}

// renumbered advertises cur with the others deprecated and waits until the
// pool holds exactly the user's block, cur's range and the others' ranges.
func renumbered(t *testing.T, w *world.World, cur string, draining ...string) {
	t.Helper()
	advertise(t, w, netipPrefix(cur), prefixesOf(draining)...)
	poolIs(t, w, "pool follows "+cur, append([]string{cur}, draining...)...)
	eventually(t, "home follows "+cur, func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == cur, st.CurrentPrefix
	})
}

func prefixesOf(ps []string) (out []netip.Prefix) {
	for _, p := range ps {
		out = append(out, netipPrefix(p))
	}
	return out
}

// minimalWrites asserts the writes of one renumbering: one digest patch per
// node, one pool patch and one status patch by the writer.
func minimalWrites(t *testing.T, w *world.World, m world.Mark, nodes []string) {
	t.Helper()
	settleWrites()
	ws, err := w.API.WritesSince(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	onePatchPerNode(t, world.Filter(ws, world.ByUser(agentUser)), nodes...)
	got := objectWrites(world.Filter(ws, world.ByUser(writerUser)))
	want := []string{"patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200"}
	if !slices.Equal(got, want) {
		t.Errorf("writer object writes:\n got %q\nwant %q", got, want)
	}
}

// noObjectWrites asserts that since m neither identity wrote anything but
// Lease renewals and events.
func noObjectWrites(t *testing.T, w *world.World, m world.Mark, what string) {
	t.Helper()
	settleWrites()
	ws, err := w.API.WritesSince(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	if got := world.Filter(ws, world.ByUser(agentUser)); len(got) != 0 {
		t.Errorf("%s: agent writes %v, want none", what, got)
	}
	if got := objectWrites(world.Filter(ws, world.ByUser(writerUser))); len(got) != 0 {
		t.Errorf("%s: writer object writes %q, want none", what, got)
	}
}

// TestRealNodes runs the shipped kustomize install on three real nodes: the
// first RA converges, a quiet minute costs only Lease renewals, a renumbering
// costs the minimal writes, a DaemonSet rollout to a new image costs nothing,
// and a change made while the leader Pod is deleted lands.
func TestRealNodes(t *testing.T) { realNodeScenarios(t, "kustomize") }

// TestRealNodesHelm (make e2e): the same scenarios, installed with `helm
// install` and the chart's defaults.
func TestRealNodesHelm(t *testing.T) {
	long(t)
	realNodeScenarios(t, "helm")
}

func realNodeScenarios(t *testing.T, install string) {
	w := realWorld(t, 3, install)
	ctx := t.Context()
	nodes := []string{"node1", "node2", "node3"}

	t.Run("install converges from the first RA", func(t *testing.T) {
		m := mark(t, w)
		renumbered(t, w, prefixA.String())
		for _, p := range pods(t, w, "renumber-agent") {
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				t.Errorf("agent Pod %s: %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
			}
		}
		settleWrites()
		ws, err := w.API.WritesSince(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		onePatchPerNode(t, world.Filter(ws, world.ByUser(agentUser)), nodes...)
	})

	t.Run("quiet: only the leader's Lease renewals", func(t *testing.T) {
		d := time.Minute
		if os.Getenv("E2E_FULL") != "" {
			d = 5 * time.Minute
		}
		quietFor(t, w, d)
	})

	t.Run("renumbering: minimal writes", func(t *testing.T) {
		m := mark(t, w)
		renumbered(t, w, prefixB.String(), prefixA.String())
		minimalWrites(t, w, m, nodes)
	})

	t.Run("DaemonSet rollout to a new image: no writes", func(t *testing.T) {
		for _, k := range w.Kubelets {
			if err := k.Tag(ctx, "docker.io/renumber/agent:dev", "docker.io/renumber/agent:rollout"); err != nil {
				t.Fatal(err)
			}
		}
		m := mark(t, w)
		before := podNames(pods(t, w, "renumber-agent"))
		patch := `{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"renumber/agent:rollout"}]}}}}`
		if _, err := w.API.Client.AppsV1().DaemonSets(world.Namespace).Patch(ctx, world.AgentDaemonSet, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := w.WaitRollout(ctx, "DaemonSet", world.AgentDaemonSet, rolloutLimit); err != nil {
			t.Fatal(err)
		}
		after := podNames(pods(t, w, "renumber-agent"))
		if len(after) != 3 || slices.ContainsFunc(after, func(n string) bool { return slices.Contains(before, n) }) {
			t.Fatalf("agent Pods before %v, after %v: want three new ones", before, after)
		}
		noObjectWrites(t, w, m, "agent rollout")
	})

	t.Run("leader Pod deleted with a change made meanwhile", func(t *testing.T) {
		leader := leaderPod(t, w)
		m := mark(t, w)
		if err := w.API.Client.CoreV1().Pods(world.Namespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		renumbered(t, w, prefixC.String(), prefixB.String(), prefixA.String())
		if l := leaderPod(t, w); l == leader {
			t.Errorf("the deleted Pod %s still leads", l)
		}
		minimalWrites(t, w, m, nodes)
		if err := w.WaitRollout(ctx, "Deployment", world.WriterDeployment, rolloutLimit); err != nil {
			t.Fatal(err)
		}
	})
}

func podNames(ps []corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestRealNodesOperations (make e2e): what an operator does to a running
// install on three real nodes costs no write beyond Lease renewals - an agent
// Pod deleted, the writer restarted with `kubectl rollout restart`, a node
// drained - and a 30 s API server stall keeps the lease and lands the change
// made during it.
func TestRealNodesOperations(t *testing.T) {
	long(t)
	w := realWorld(t, 3, "kustomize")
	ctx := t.Context()
	renumbered(t, w, prefixA.String())
	settleWrites()

	t.Run("agent Pod deleted: replaced, no writes", func(t *testing.T) {
		m := mark(t, w)
		replaceAgentPod(t, w, "node2")
		noObjectWrites(t, w, m, "agent Pod replaced")
	})

	t.Run("writer rollout restart: no object writes", func(t *testing.T) {
		m := mark(t, w)
		before := podNames(pods(t, w, "renumber-writer"))
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339))
		if _, err := w.API.Client.AppsV1().Deployments(world.Namespace).Patch(ctx, world.WriterDeployment, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "new writer Pods", func() (bool, string) {
			after := podNames(pods(t, w, "renumber-writer"))
			return !slices.ContainsFunc(after, func(n string) bool { return slices.Contains(before, n) }), fmt.Sprint(after)
		})
		if err := w.WaitRollout(ctx, "Deployment", world.WriterDeployment, rolloutLimit); err != nil {
			t.Fatal(err)
		}
		if l := leaderPod(t, w); slices.Contains(before, l) {
			eventually(t, "a new Pod leads", func() (bool, string) {
				l := leaderPod(t, w)
				return !slices.Contains(before, l), l
			})
		}
		noObjectWrites(t, w, m, "writer restarted")
	})

	t.Run("30 s API server stall: same leader, the change lands", func(t *testing.T) {
		leases := w.API.Client.CoordinationV1().Leases(world.Namespace)
		before, err := leases.Get(ctx, "renumber-writer", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.API.Pause(true); err != nil {
			t.Fatal(err)
		}
		advertise(t, w, prefixB, prefixA)
		time.Sleep(30 * time.Second)
		if err := w.API.Pause(false); err != nil {
			t.Fatal(err)
		}
		poolIs(t, w, "the change made during the stall lands", prefixB.String(), prefixA.String())
		after, err := leases.Get(ctx, "renumber-writer", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *after.Spec.HolderIdentity != *before.Spec.HolderIdentity || *after.Spec.LeaseTransitions != *before.Spec.LeaseTransitions {
			t.Errorf("lease moved: %s -> %s", *before.Spec.HolderIdentity, *after.Spec.HolderIdentity)
		}
		for _, p := range pods(t, w, "renumber-writer") {
			for _, c := range p.Status.ContainerStatuses {
				if c.RestartCount != 0 {
					t.Errorf("writer Pod %s restarted %d times in a stall", p.Name, c.RestartCount)
				}
			}
		}
	})

	t.Run("node drained: the writer moves, no object writes", func(t *testing.T) {
		settleWrites()
		leader := leaderPod(t, w)
		var node string
		for _, p := range pods(t, w, "renumber-writer") {
			if p.Name == leader {
				node = p.Spec.NodeName
			}
		}
		m := mark(t, w)
		if err := w.Drain(ctx, node); err != nil {
			t.Fatal(err)
		}
		if err := w.WaitRollout(ctx, "Deployment", world.WriterDeployment, rolloutLimit); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods(t, w, "renumber-writer") {
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
				t.Errorf("writer Pod %s still on the drained %s", p.Name, node)
			}
		}
		eventually(t, "a writer on another node leads", func() (bool, string) {
			l := leaderPod(t, w)
			return l != leader, l
		})
		noObjectWrites(t, w, m, "node drained")
	})
}

// TestRealNodesAgentWithoutNetRaw: the agent binary carries
// cap_net_bind_service,cap_net_raw=ep, so a DaemonSet whose securityContext
// drops ALL without adding NET_RAW (and NET_BIND_SERVICE) back
// cannot start it: the container exits 255 and its log says "operation not
// permitted", the line README's Troubleshooting section explains.
func TestRealNodesAgentWithoutNetRaw(t *testing.T) {
	w := realWorld(t, 1, "kustomize")
	ctx := t.Context()
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"agent","securityContext":{"capabilities":{"add":null}}}]}}}}`
	if _, err := w.API.Client.AppsV1().DaemonSets(world.Namespace).Patch(ctx, world.AgentDaemonSet, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// runc starts the container, and the kernel refuses the exec: exit 255,
	// and the reason is the container's only log line.
	var log string
	eventually(t, "the agent container exits 255 saying why", func() (bool, string) {
		ps := pods(t, w, "renumber-agent")
		if len(ps) != 1 || len(ps[0].Status.ContainerStatuses) != 1 {
			return false, fmt.Sprintf("%d agent Pods", len(ps))
		}
		last := ps[0].Status.ContainerStatuses[0].LastTerminationState.Terminated
		if last == nil || last.ExitCode != 255 {
			return false, fmt.Sprintf("%s: %+v", ps[0].Name, ps[0].Status.ContainerStatuses[0].State)
		}
		b, err := w.API.Client.CoreV1().Pods(world.Namespace).GetLogs(ps[0].Name, &corev1.PodLogOptions{Container: "agent", Previous: true}).DoRaw(ctx)
		log = string(b)
		return err == nil && strings.Contains(log, "operation not permitted"), fmt.Sprintf("log %q, %v", b, err)
	})
	t.Logf("the agent's log without NET_RAW: %s", strings.TrimSpace(log))
}

// replaceAgentPod deletes the agent Pod on node and waits until the
// DaemonSet's replacement there is Ready; it returns the new Pod's name.
func replaceAgentPod(t *testing.T, w *world.World, node string) string {
	t.Helper()
	var victim corev1.Pod
	for _, p := range pods(t, w, "renumber-agent") {
		if p.Spec.NodeName == node {
			victim = p
		}
	}
	if err := w.API.Client.CoreV1().Pods(world.Namespace).Delete(t.Context(), victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var replaced string
	eventually(t, "a new agent Pod on "+node, func() (bool, string) {
		for _, p := range pods(t, w, "renumber-agent") {
			if p.Spec.NodeName == node && p.Name != victim.Name && podReady(p) {
				replaced = p.Name
				return true, ""
			}
		}
		return false, fmt.Sprint(podNames(pods(t, w, "renumber-agent")))
	})
	return replaced
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestRealNodesDHCPv6Client: the built-in DHCPv6-PD client in the shipped
// agent Pod (non-root, the client port bound with the NET_BIND_SERVICE the
// DaemonSet adds and the binary carries) against ISC dhcpd in the router.
// The writer Pod names the client's node, the delegation reaches the pool,
// and the client's agent Pod, deleted and replaced, asks again as the same
// client and gets the same prefix: nothing is written.
func TestRealNodesDHCPv6Client(t *testing.T) {
	w := realWorld(t, 2, "kustomize")
	ctx := t.Context()
	pool := netip.MustParsePrefix("2001:db8:a00::/52")
	if err := w.Net.Router.DelegatePrefixes(ctx, world.Delegation{Pool: pool, Length: 56, Valid: 2 * time.Minute, Preferred: time.Minute}); err != nil {
		t.Fatal(err)
	}
	patch := `{"spec":{"acquisition":{"routerAdvertisement":null,"dhcpv6pd":{"interface":"eth0"}}}}`
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var p netip.Prefix
	var client string // whichever node the writer names
	eventually(t, "a node's agent Pod is delegated a prefix and the pool follows", func() (bool, string) {
		st := dpStatus(t, w, "home")
		cur, err := netip.ParsePrefix(st.CurrentPrefix)
		if err != nil || !pool.Contains(cur.Addr()) || st.DHCPv6PD == nil || st.DHCPv6PD.ClientNode == "" {
			return false, fmt.Sprintf("%s %+v", st.CurrentPrefix, st.DHCPv6PD)
		}
		p, client = cur, st.DHCPv6PD.ClientNode
		b := blocks(t, w, "lb")
		return slices.Equal(b, []string{"192.0.2.0/24", p.String()}), fmt.Sprint(b)
	})

	settleWrites()
	m := mark(t, w)
	// The other node's agent confirms the delegation with Solicits of its
	// own: count from here.
	solicits := countLog(w, "rt-dhcpd.log", "Solicit message from")
	replaced := replaceAgentPod(t, w, client)
	eventually(t, "the new Pod's client asked the server", func() (bool, string) {
		return countLog(w, "rt-dhcpd.log", "Solicit message from") > solicits, ""
	})
	noObjectWrites(t, w, m, "the client's agent Pod replaced")
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != p.String() {
		t.Errorf("after the agent Pod's restart: %s, want %s (the same client asked again)", st.CurrentPrefix, p)
	}
	b, err := w.API.Client.CoreV1().Pods(world.Namespace).GetLogs(replaced, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if log := string(b); !strings.Contains(log, "DHCPv6 client started") || strings.Contains(log, "cannot open its socket") {
		t.Errorf("the new agent Pod's log:\n%s", log)
	}
}
