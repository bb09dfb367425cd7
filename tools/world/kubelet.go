package world

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Real nodes (Options.Kubelets): every node namespace runs containerd, runc and
// a kubelet, the control plane adds kube-controller-manager and kube-scheduler,
// and the shipped DaemonSet and Deployment run as real Pods from images built
// by `make images`. Facts this follows: ../shared/notes/nodeworld.md.
//
// Containment. Each node's containerd and kubelet share one private mount
// namespace (joined to the node's network namespace) in which the host paths
// they share whatever their configuration says (sharedPaths) are bind mounts of
// the node's own directories, so shim sockets, CNI caches and container log
// links never touch the host's. runc's state and the Pods' network namespaces
// live under the node's directory. Cgroups live under a root of the world's own
// in every hierarchy. The global sysctls kubelet sets are recorded before the
// first world's kubelets start and restored when the last world's real nodes
// are torn down.

// NodeBinaries are the node parts `make node-tools` builds into _out/bin.
var NodeBinaries = []string{"kubelet", "kube-controller-manager", "kube-scheduler", "containerd",
	"containerd-shim-runc-v2", "ctr", "runc", "cni/bridge", "cni/host-local", "cni/loopback"}

// NodeImages are the OCI image tarballs under _out/images every real node
// imports: `make images node-images` builds them.
var NodeImages = []string{"pause.oci.tar", "agent.oci.tar", "writer.oci.tar"}

// PauseImage is the sandbox image (a static Go pause, tools/images/pause).
const PauseImage = "docker.io/renumber/pause:dev"

// kubeletSysctls are the global settings kubelet changes at start.
var kubeletSysctls = []string{"vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops"}

// cgroupHierarchies are the cgroup v1 hierarchies a node's cgroup root is made in.
var cgroupHierarchies = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd", "unified"}

// sharedPaths are the host paths containerd, runc, the CNI plugins and kubelet
// use whatever their configuration says; each node mounts its own over them.
var sharedPaths = []struct{ host, own string }{
	{"/run/containerd", "run-containerd"},
	{"/var/lib/cni", "var-lib-cni"},
	{"/var/log/containers", "var-log-containers"},
}

// RequireKubelets reports why real nodes cannot run here, or nil.
func RequireKubelets() error {
	bin, err := binDir()
	if err != nil {
		return err
	}
	for _, b := range NodeBinaries {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("world: %s not built (run `make node-tools`)", b)
		}
	}
	repo, err := RepoRoot()
	if err != nil {
		return err
	}
	for _, img := range NodeImages {
		if _, err := os.Stat(filepath.Join(repo, "_out", "images", img)); err != nil {
			return fmt.Errorf("world: image %s not built (run `make images node-images`)", img)
		}
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		return fmt.Errorf("world: nsenter not found: %w", err)
	}
	return nil
}

// ServiceAddr is the `kubernetes` Service's ClusterIP in a world with real
// nodes: the first address of the Service range, on the root namespace's end of
// the bridge. The API server serves on port 443 there, so Pods use the
// unmodified KUBERNETES_SERVICE_HOST and _PORT with no kube-proxy.
func (n *Network) ServiceAddr() netip.Addr {
	return netip.MustParseAddr("fd72:6e75:" + n.w.ID + ":ffff::1")
}

// ServiceRange is the Service ClusterIP range of a world with real nodes.
func (n *Network) ServiceRange() netip.Prefix {
	return netip.MustParsePrefix("fd72:6e75:" + n.w.ID + ":ffff::/112")
}

// addServiceAddr puts the Service address on the root namespace's end.
func (n *Network) addServiceAddr(ctx context.Context) error {
	return run(ctx, "ip", "addr", "add", n.ServiceAddr().String()+"/128", "dev", hostLink(n.w.ID), "nodad")
}

// routePods wires the Pod ranges: the root namespace routes each node's Pod
// range to that node; each node forwards, and reaches the Service range
// through the root namespace.
func (n *Network) routePods(ctx context.Context) error {
	host := hostLink(n.w.ID)
	for _, nd := range n.Nodes {
		if err := runAll(ctx,
			[]string{"ip", "-6", "route", "replace", nd.PodRange.String(), "via", nd.ControlAddr.String(), "dev", host},
			[]string{"ip", "-n", nd.NS, "-6", "route", "replace", n.ServiceRange().String(), "via", n.HostAddr.String(), "dev", nd.Link},
		); err != nil {
			return err
		}
		// accept_ra=2 keeps SLAAC on the uplink with forwarding on.
		if err := sysctls(ctx, nd.NS, "net.ipv6.conf.all.forwarding=1"); err != nil {
			return err
		}
	}
	return nil
}

// Kubelet is one real node's containerd and kubelet.
type Kubelet struct {
	Node       *Node
	Dir        string
	Socket     string // containerd's CRI socket
	CgroupRoot string // kubelet's cgroupRoot, the same in every hierarchy
	containerd *exec.Cmd
}

// startNodes starts the controller manager, the scheduler and one kubelet per
// node, imports the images, and waits until every node is Ready.
// AgentStateDir is the agent's --state-dir in the shipped install (manifests
// and the chart's default for the release renumber): a hostPath on the node.
const AgentStateDir = "/var/lib/renumber-agent"

func (w *World) startNodes(ctx context.Context) error {
	if err := recordSysctls(); err != nil {
		return err
	}
	if err := w.Net.routePods(ctx); err != nil {
		return fmt.Errorf("pod routes: %w", err)
	}
	if err := w.API.startControllers(); err != nil {
		return err
	}
	for _, nd := range w.Net.Nodes {
		// The shipped install keeps the agent's memory of the routers in
		// a hostPath, which real nodes here share with every world before:
		// start from none, as a new node does.
		if err := os.Remove(filepath.Join(AgentStateDir, "routers-"+nd.Name+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", nd.Name, err)
		}
		k, err := w.startKubelet(ctx, nd)
		if err != nil {
			return fmt.Errorf("%s: %w", nd.Name, err)
		}
		w.Kubelets = append(w.Kubelets, k)
	}
	return w.WaitNodesReady(ctx, 2*time.Minute)
}

// WaitNodesReady waits until every node reports Ready.
func (w *World) WaitNodesReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		nodes, err := w.API.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		ready := 0
		if err == nil {
			for _, n := range nodes.Items {
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
		}
		if ready == len(w.Net.Nodes) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("world: %d of %d nodes Ready (see %s/kubelet-*.log): %w", ready, len(w.Net.Nodes), w.Dir, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// startControllers runs kube-controller-manager and kube-scheduler in the root
// namespace, each with its own certificate identity.
func (cp *ControlPlane) startControllers() error {
	for _, c := range []struct{ bin, user string }{
		{"kube-controller-manager", "system:kube-controller-manager"},
		{"kube-scheduler", "system:kube-scheduler"},
	} {
		bin, err := Bin(c.bin)
		if err != nil {
			return err
		}
		cert, key, err := cp.pki.issue(c.bin, pkix.Name{CommonName: c.user}, x509.ExtKeyUsageClientAuth, nil, nil)
		if err != nil {
			return err
		}
		kc := filepath.Join(cp.w.Dir, c.bin+".kubeconfig")
		if err := cp.writeKubeconfig(kc, c.user, map[string]string{"client-certificate": cert, "client-key": key}); err != nil {
			return err
		}
		argv := []string{bin, "--kubeconfig", kc, "--leader-elect=false", "--secure-port=0", "--v=1"}
		if c.bin == "kube-controller-manager" {
			argv = append(argv, "--root-ca-file", cp.pki.CAFile, "--service-account-private-key-file", cp.pki.SASignerKey,
				"--use-service-account-credentials=true", "--controllers=*,-nodeipam,-service-lb-controller,-route,-cloud-node-lifecycle",
				"--concurrent-deployment-syncs=2", "--concurrent-daemonset-syncs=2")
		}
		if _, err := cp.w.spawn("", c.bin+".log", argv...); err != nil {
			return err
		}
	}
	return nil
}

func (w *World) startKubelet(ctx context.Context, nd *Node) (*Kubelet, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	k := &Kubelet{Node: nd, Dir: filepath.Join(w.Dir, nd.Name), CgroupRoot: "/rn" + w.ID + "-" + nd.Name}
	k.Socket = filepath.Join(k.Dir, "containerd.sock")
	for _, d := range []string{"containerd/root", "containerd/state", "run-containerd", "var-lib-cni", "var-log-containers", "net.d", "kubelet", "pods", "runc"} {
		if err := os.MkdirAll(filepath.Join(k.Dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if err := w.makeCgroupRoot(k.CgroupRoot); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(k.Dir, "net.d", "10-world.conflist"), []byte(cniConfig(w.ID, nd)), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(k.Dir, "containerd.toml"), []byte(containerdConfig(k, bin)), 0o600); err != nil {
		return nil, err
	}
	// A private mount namespace in which the shared runtime paths are the node's
	// own, joined to the node's network namespace.
	var script strings.Builder
	for _, m := range sharedPaths {
		if err := os.MkdirAll(m.host, 0o755); err != nil {
			return nil, err
		}
		fmt.Fprintf(&script, "mount --bind %s %s && ", filepath.Join(k.Dir, m.own), m.host)
	}
	fmt.Fprintf(&script, "exec nsenter --net=/run/netns/%s %s --config %s", nd.NS,
		filepath.Join(bin, "containerd"), filepath.Join(k.Dir, "containerd.toml"))
	k.containerd, err = w.spawnEnv("", "containerd-"+nd.Name+".log", []string{"PATH=" + bin + ":" + os.Getenv("PATH")},
		"unshare", "-m", "--propagation", "slave", "sh", "-c", script.String())
	if err != nil {
		return nil, err
	}
	if err := waitSocket(ctx, k.Socket, 30*time.Second); err != nil {
		return nil, fmt.Errorf("containerd (see %s): %w", filepath.Join(w.Dir, "containerd-"+nd.Name+".log"), err)
	}
	repo, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	for _, img := range NodeImages {
		if err := k.ctr(ctx, "images", "import", "--platform", "linux/"+runtime.GOARCH, filepath.Join(repo, "_out", "images", img)); err != nil {
			return nil, err
		}
	}
	kc, err := w.API.kubeletKubeconfig(nd.Name)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(k.Dir, "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte(kubeletConfig(k, w.API.pki.CAFile)), 0o600); err != nil {
		return nil, err
	}
	// kubelet joins containerd's mount namespace: Pod volumes must be visible to both.
	_, err = w.spawn("", "kubelet-"+nd.Name+".log", "nsenter", "-t", fmt.Sprint(k.containerd.Process.Pid), "-m", "-n",
		filepath.Join(bin, "kubelet"), "--config", cfg, "--kubeconfig", kc,
		"--root-dir", filepath.Join(k.Dir, "kubelet"), "--hostname-override", nd.Name,
		"--node-ip", nd.ControlAddr.String(), "--v=1")
	return k, err
}

// Tag gives an imported image a second name (a "new" image for a rollout).
func (k *Kubelet) Tag(ctx context.Context, from, to string) error {
	return k.ctr(ctx, "images", "tag", "--force", from, to)
}

func (k *Kubelet) ctr(ctx context.Context, args ...string) error {
	bin, err := binDir()
	if err != nil {
		return err
	}
	return run(ctx, append([]string{filepath.Join(bin, "ctr"), "--address", k.Socket, "--namespace", "k8s.io"}, args...)...)
}

// kubeletKubeconfig issues the node's client certificate (system:node:<name>,
// for the Node authorizer and NodeRestriction) and writes its kubeconfig.
func (cp *ControlPlane) kubeletKubeconfig(node string) (string, error) {
	user := "system:node:" + node
	cert, key, err := cp.pki.issue("kubelet-"+node, pkix.Name{CommonName: user, Organization: []string{"system:nodes"}}, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return "", err
	}
	kc := filepath.Join(cp.w.Dir, "kubelet-"+node+".kubeconfig")
	return kc, cp.writeKubeconfig(kc, user, map[string]string{"client-certificate": cert, "client-key": key})
}

func containerdConfig(k *Kubelet, bin string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[5]q

[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = false
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %[6]q
        Root = %[7]q
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[8]q]
    conf_dir = %[9]q
`, filepath.Join(k.Dir, "containerd/root"), filepath.Join(k.Dir, "containerd/state"),
		k.Socket, k.Socket+".ttrpc", PauseImage,
		filepath.Join(bin, "runc"), filepath.Join(k.Dir, "runc"),
		filepath.Join(bin, "cni"), filepath.Join(k.Dir, "net.d"))
}

// cniConfig is the node's Pod network: a bridge with the node's Pod range,
// the node as the Pods' router. No NAT, no iptables.
func cniConfig(id string, nd *Node) string {
	r := nd.PodRange
	gw := r.Addr().Next()
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "rn%[1]s-%[2]s",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %[3]q, "gateway": %[4]q}]],
              "routes": [{"dst": "::/0"}]}},
    {"type": "loopback"}
  ]
}
`, id, nd.Name, r.String(), gw.String())
}

func kubeletConfig(k *Kubelet, caFile string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]q
containerRuntimeEndpoint: unix://%[2]s
podLogsDir: %[3]q
address: %[4]q
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[5]q}
authorization: {mode: AlwaysAllow}
failSwapOn: false
makeIPTablesUtilChains: false
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
enforceNodeAllocatable: ["pods"]
serializeImagePulls: false
`, k.CgroupRoot, k.Socket, filepath.Join(k.Dir, "pods"), k.Node.ControlAddr.String(), caFile)
}

// makeCgroupRoot creates root in every cgroup v1 hierarchy (and the unified
// one), with cpuset's CPUs and memory nodes copied from the parent, and records
// it for teardown.
func (w *World) makeCgroupRoot(root string) error {
	w.record(func(s *state) { s.CgroupRoots = append(s.CgroupRoots, root) })
	for _, h := range cgroupHierarchies {
		base := filepath.Join("/sys/fs/cgroup", h)
		if _, err := os.Stat(base); err != nil {
			continue
		}
		dir := filepath.Join(base, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup root: %w", err)
		}
		if h == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(base, f))
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, f), b, 0o644)
				}
				if err != nil {
					return fmt.Errorf("cgroup root %s: %w", f, err)
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot kills every process left under root and removes its cgroups,
// deepest first.
func removeCgroupRoot(root string) {
	for _, h := range cgroupHierarchies {
		dir := filepath.Join("/sys/fs/cgroup", h, root)
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			killAll(dirs[i])
			for range 20 {
				if err := os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				killAll(dirs[i])
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

func killAll(cgroup string) {
	b, _ := os.ReadFile(filepath.Join(cgroup, "cgroup.procs"))
	self := os.Getpid()
	for _, f := range strings.Fields(string(b)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid != self {
			_ = syscallKill(pid)
		}
	}
}

// The kind smoke (e2e/kind/run.sh) runs kubelets too - after go test in make
// test, but beside it whenever someone runs both at once - and kubelets
// change the same global sysctls. Both keep the machine's
// values in sysctlsFile (whoever starts first records them), and the last one
// out puts them back: a world leaves that to the smoke while it holds
// kubeletsLockFile, the smoke to the worlds while any world's real nodes are
// left.

// kubeletsLockFile is held by the kind smoke for its cluster's life, and by a
// test that compares the machine's sysctls before and after
// (HoldKubeletsLock).
var kubeletsLockFile = "/run/renumber-world/kubelets.lock"

// kubeletsLockWait bounds the wait for the lock: the kind smoke holds it for
// a few minutes.
const kubeletsLockWait = 20 * time.Minute

// HoldKubeletsLock waits until the kind smoke is not running and keeps it
// from starting until release is called.
func HoldKubeletsLock(ctx context.Context) (release func(), err error) {
	ctx, cancel := context.WithTimeout(ctx, kubeletsLockWait)
	defer cancel()
	if err := os.MkdirAll(filepath.Dir(kubeletsLockFile), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(kubeletsLockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			heldHere.Store(true)
			return func() { heldHere.Store(false); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("%s: %w", kubeletsLockFile, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s (the kind smoke runs kubelets): %w", kubeletsLockFile, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// heldHere: this process holds the kubelets lock (HoldKubeletsLock).
var heldHere atomic.Bool

// kindRunning reports whether another process - the kind smoke - holds the
// kubelets lock now.
func kindRunning() bool {
	if heldHere.Load() {
		return false
	}
	f, err := os.Open(kubeletsLockFile)
	if err != nil {
		return false
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil
}

// sysctlsFile keeps the machine's own values of kubeletSysctls while any world
// with real nodes runs: written by the first, put back by the last.
const sysctlsFile = "/run/renumber-world/sysctls.json"

// recordSysctls saves the global settings kubelet changes, unless a world
// running (or one that died without teardown) saved them already: then the
// current values may be kubelet's, and the saved ones are the machine's.
func recordSysctls() error {
	if _, err := os.Stat(sysctlsFile); err == nil {
		return nil
	}
	saved := map[string]string{}
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(k, ".", "/"))
		if err != nil {
			return err
		}
		saved[k] = strings.TrimSpace(string(b))
	}
	b, _ := json.Marshal(saved)
	if err := os.MkdirAll(filepath.Dir(sysctlsFile), 0o700); err != nil {
		return err
	}
	return os.WriteFile(sysctlsFile, b, 0o600)
}

// restoreSysctls puts the machine's values back once no world's real nodes
// are left (no cgroup root of one in any hierarchy) and no kind smoke runs.
func restoreSysctls() {
	if left, _ := filepath.Glob("/sys/fs/cgroup/pids/rn*-node*"); len(left) > 0 {
		return
	}
	if kindRunning() {
		return // the kind smoke puts them back when it ends
	}
	b, err := os.ReadFile(sysctlsFile)
	if err != nil {
		return
	}
	var saved map[string]string
	if json.Unmarshal(b, &saved) != nil {
		return
	}
	for k, v := range saved {
		_ = os.WriteFile("/proc/sys/"+strings.ReplaceAll(k, ".", "/"), []byte(v), 0o644)
	}
	_ = os.Remove(sysctlsFile)
}

func waitSocket(ctx context.Context, path string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", path, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
