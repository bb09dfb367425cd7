package world_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/renumber/renumber/tools/world"
)

func start(t *testing.T, opts world.Options) *world.World {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a test world: not with -short (make unit)")
	}
	if err := world.Require(); err != nil {
		t.Skipf("test world unavailable: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts.Log = testWriter{t}
	w, err := world.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

type testWriter struct{ t *testing.T }

func (tw testWriter) Write(p []byte) (int, error) {
	tw.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

var poolGVR = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumloadbalancerippools"}

func TestAPIServerEnforcesCiliumSchema(t *testing.T) {
	w := start(t, world.Options{Nodes: 1})
	ctx := t.Context()
	if err := w.API.InstallCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.API.Client.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{}); err != nil {
		t.Fatalf("node1 was not created: %v", err)
	}
	pool := func(blocks any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
			"metadata": map[string]any{"name": "p"},
			"spec":     map[string]any{"blocks": blocks},
		}}
	}
	pools := w.API.Dynamic.Resource(poolGVR)
	if _, err := pools.Create(ctx, pool([]any{map[string]any{"cidr": "not-a-cidr"}}), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("pool with a malformed CIDR: got %v, want Invalid", err)
	}
	if _, err := pools.Create(ctx, pool("2001:db8::/64"), metav1.CreateOptions{}); !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Errorf("pool with blocks as a string: got %v, want Invalid", err)
	}
	if _, err := pools.Create(ctx, pool([]any{map[string]any{"cidr": "2001:db8::/64"}, map[string]any{"start": "192.0.2.10", "stop": "192.0.2.20"}}), metav1.CreateOptions{}); err != nil {
		t.Errorf("valid pool rejected: %v", err)
	}
}

func TestAuditAttributesWritesToIdentities(t *testing.T) {
	w := start(t, world.Options{Nodes: 2})
	ctx := t.Context()
	if err := w.API.InstallCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.API.InstallRBAC(ctx); err != nil {
		t.Fatal(err)
	}
	agent, err := w.API.ServiceAccount(ctx, "renumber-agent", "node1")
	if err != nil {
		t.Fatal(err)
	}
	writer, err := w.API.ServiceAccount(ctx, "renumber-writer", "")
	if err != nil {
		t.Fatal(err)
	}
	mark, err := w.API.Mark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agentClient := kubernetes.NewForConfigOrDie(agent.Config)
	patch := []byte(`{"metadata":{"annotations":{"dynamic-prefix.io/node-prefixes":"v1;eth0="}}}`)
	if _, err := agentClient.CoreV1().Nodes().Patch(ctx, "node1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("agent identity cannot patch its node: %v", err)
	}
	// The shipped RBAC gives the agent no write on anything but nodes.
	_, err = dynamic.NewForConfigOrDie(agent.Config).Resource(poolGVR).Patch(ctx, "x", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("agent patching a pool: got %v, want Forbidden", err)
	}
	// And the writer none on nodes.
	_, err = kubernetes.NewForConfigOrDie(writer.Config).CoreV1().Nodes().Patch(ctx, "node2", types.MergePatchType, patch, metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("writer patching a node: got %v, want Forbidden", err)
	}

	writes, err := w.API.WritesSince(ctx, mark)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, wr := range writes {
		got = append(got, wr.String())
	}
	want := []string{
		"system:serviceaccount:renumber-system:renumber-agent patch nodes /node1 -> 200",
		"system:serviceaccount:renumber-system:renumber-agent patch ciliumloadbalancerippools /x -> 403",
		"system:serviceaccount:renumber-system:renumber-writer patch nodes /node2 -> 403",
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit writes:\n got %q\nwant %q", got, want)
	}
}

func TestNodeReceivesRAAndDoesSLAAC(t *testing.T) {
	w := start(t, world.Options{Nodes: 2, NoControlPlane: true})
	ctx := t.Context()
	node, _ := w.Net.Node("node1")

	var conn *ndp.Conn
	err := node.Do(func() error {
		ifi, err := net.InterfaceByName(node.Link)
		if err != nil {
			return err
		}
		for range 50 { // the link-local address is tentative for a moment
			if conn, _, err = ndp.Listen(ifi, ndp.LinkLocal); err == nil {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return err
	})
	if err != nil {
		t.Fatalf("listening for RAs in node1: %v", err)
	}
	defer conn.Close()

	a := netip.MustParsePrefix("2001:db8:1:100::/64")
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: a, Valid: 300 * time.Second, Preferred: 200 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(15 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for {
		msg, _, from, err := conn.ReadFrom()
		if err != nil {
			t.Fatalf("no RA with %s reached node1: %v", a, err)
		}
		ra, ok := msg.(*ndp.RouterAdvertisement)
		if !ok {
			continue
		}
		if pi := prefixInfo(ra, a); pi != nil {
			if pi.ValidLifetime != 300*time.Second || pi.PreferredLifetime != 200*time.Second {
				t.Errorf("lifetimes = %v/%v, want 300s/200s", pi.ValidLifetime, pi.PreferredLifetime)
			}
			t.Logf("RA from %s carries %s", from, a)
			break
		}
	}
	waitAddr(t, w, "node1", a, false)
	waitAddr(t, w, "node2", a, false)

	// Renumber: B appears, A deprecated (preferred lifetime 0) on every node.
	b := netip.MustParsePrefix("2001:db8:2:200::/64")
	if err := w.Net.Router.Advertise(ctx,
		world.Advert{Prefix: b, Valid: 300 * time.Second, Preferred: 200 * time.Second},
		world.Advert{Prefix: a, Valid: 300 * time.Second, Preferred: 0},
	); err != nil {
		t.Fatal(err)
	}
	waitAddr(t, w, "node1", b, false)
	waitAddr(t, w, "node1", a, true)
}

func prefixInfo(ra *ndp.RouterAdvertisement, p netip.Prefix) *ndp.PrefixInformation {
	for _, o := range ra.Options {
		if pi, ok := o.(*ndp.PrefixInformation); ok && netip.PrefixFrom(pi.Prefix, int(pi.PrefixLength)) == p {
			return pi
		}
	}
	return nil
}

// waitAddr waits until node holds a non-tentative SLAAC address in p with the
// given deprecation state.
func waitAddr(t *testing.T, w *world.World, name string, p netip.Prefix, deprecated bool) {
	t.Helper()
	node, _ := w.Net.Node(name)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		addrs, err := node.Addrs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if p.Contains(a.Prefix.Addr()) && !a.Tentative && a.Deprecated == deprecated {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	addrs, _ := node.Addrs(t.Context())
	t.Fatalf("%s: no address in %s (deprecated=%v); has %+v", name, p, deprecated, addrs)
}

func TestWorldsDoNotCollideAndCleanUp(t *testing.T) {
	a := start(t, world.Options{Nodes: 1, NoControlPlane: true})
	b := start(t, world.Options{Nodes: 1, NoControlPlane: true})
	if a.ID == b.ID || a.Net.Nodes[0].NS == b.Net.Nodes[0].NS {
		t.Fatalf("two worlds share names: %s %s", a.Net.Nodes[0].NS, b.Net.Nodes[0].NS)
	}
	ns := a.Net.Nodes[0].NS
	a.Close()
	if _, err := os.Stat("/run/netns/" + ns); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("namespace %s left behind after Close", ns)
	}
	// Gone when Close returns, not when the kernel's cleanup of the bridge's
	// namespace gets to it: the next world may take the ID at once.
	if _, err := os.Stat("/sys/class/net/rn" + a.ID + "h"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the root namespace's link rn%sh left behind after Close", a.ID)
	}
}

func TestRogueRouterReachesOneNodeOnly(t *testing.T) {
	w := start(t, world.Options{Nodes: 2, NoControlPlane: true})
	ctx := t.Context()
	rogue, err := w.Net.RogueRouter(ctx, "node1")
	if err != nil {
		t.Fatal(err)
	}
	foreign := netip.MustParsePrefix("2001:db8:bad::/64")
	if err := rogue.Advertise(ctx, world.Advert{Prefix: foreign, Valid: 300 * time.Second, Preferred: 200 * time.Second}); err != nil {
		t.Fatal(err)
	}
	waitAddr(t, w, "node1", foreign, false)
	// node2 must never see it: give the rogue several RA intervals.
	time.Sleep(9 * time.Second)
	node2, _ := w.Net.Node("node2")
	addrs, err := node2.Addrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if foreign.Contains(a.Prefix.Addr()) {
			t.Errorf("node2 got %s from a router that should reach node1 only", a.Prefix)
		}
	}
}

func TestAPIServerPauseAndResume(t *testing.T) {
	w := start(t, world.Options{Nodes: 0})
	ctx := t.Context()
	if err := w.API.Pause(true); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := w.API.Client.CoreV1().Nodes().List(short, metav1.ListOptions{})
	cancel()
	if err == nil {
		t.Error("a paused API server answered")
	}
	if err := w.API.Pause(false); err != nil {
		t.Fatal(err)
	}
	if err := w.API.WaitReady(ctx, 30*time.Second); err != nil {
		t.Errorf("not ready after resume: %v", err)
	}
}

// TestRealNodesDoNotCollideAndCleanUp: two worlds of real nodes run Pods side
// by side; closing one leaves the other's running and nothing of its own
// behind (processes, cgroups, mounts), and the last one puts back the global
// sysctls kubelet changed.
func TestRealNodesDoNotCollideAndCleanUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nodes: not with -short (make unit)")
	}
	if err := world.RequireKubelets(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("real nodes missing in CI: %v", err)
		}
		t.Skipf("real nodes unavailable: %v", err)
	}
	// The kind smoke of make test runs kubelets beside go test: not during
	// this comparison.
	release, err := world.HoldKubeletsLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sysctls := func() string {
		var out []string
		for _, f := range []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"} {
			b, _ := os.ReadFile("/proc/sys/" + f)
			out = append(out, f+"="+strings.TrimSpace(string(b)))
		}
		return strings.Join(out, " ")
	}
	before := sysctls()
	a := start(t, world.Options{Nodes: 1, Kubelets: true})
	b := start(t, world.Options{Nodes: 1, Kubelets: true})
	for _, w := range []*world.World{a, b} {
		runPause(t, w)
	}
	if sysctls() == before {
		t.Logf("kubelet changed no sysctl here (%s)", before)
	}
	aRoot := "/sys/fs/cgroup/pids" + a.Kubelets[0].CgroupRoot
	a.Close()
	if _, err := os.Stat(aRoot); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup root %s left behind", aRoot)
	}
	// containerd's shims leave the world's process groups: none may be left.
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if cmd, err := os.ReadFile("/proc/" + p.Name() + "/cmdline"); err == nil && strings.Contains(string(cmd), a.Dir) {
			t.Errorf("process %s left behind: %s", p.Name(), strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	if p, err := b.API.Client.CoreV1().Pods("default").Get(t.Context(), "pause", metav1.GetOptions{}); err != nil || p.Status.Phase != "Running" {
		t.Errorf("the other world's Pod after the first closed: %v %v", err, p.Status.Phase)
	}
	b.Close()
	if got := sysctls(); got != before {
		t.Errorf("sysctls after both worlds: %s, before: %s", got, before)
	}
}

// runPause runs a Pod of the pause image on the Pod network and waits for it.
func runPause(t *testing.T, w *world.World) {
	t.Helper()
	ctx := t.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "pause", Image: world.PauseImage, ImagePullPolicy: corev1.PullNever}},
		},
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := w.API.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err == nil {
			break
		}
		// The default ServiceAccount appears once the controller manager runs.
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	for {
		p, err := w.API.Client.CoreV1().Pods("default").Get(ctx, "pause", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			if !w.Net.Nodes[0].PodRange.Contains(netip.MustParseAddr(p.Status.PodIP)) {
				t.Errorf("Pod address %s outside the node's range %s", p.Status.PodIP, w.Net.Nodes[0].PodRange)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause Pod not running: %v %+v", err, p.Status)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
