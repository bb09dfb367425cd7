// Package world starts a local test world on one Linux machine: a real etcd and
// kube-apiserver, an IPv6 bridge with a router namespace running radvd, and node
// namespaces doing SLAAC on the kernel. Tests, `make world-up` and `make demo` all
// use it. It needs root; see Require.
//
// Traffic stays inside the world: the API server listens on a unique-local address
// of a veth whose peer sits on the world's bridge, every node and router lives in a
// namespace of its own, and the root namespace gets unreachable routes for the test
// ranges so a missing route can never send a packet out of the machine.
package world

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options choose what a world holds.
type Options struct {
	// Nodes is the number of node namespaces (node1..nodeN).
	Nodes int
	// NoControlPlane skips etcd and the API server (network-only tests).
	NoControlPlane bool
	// Root is the directory for world state; default <repo>/_out/worlds.
	Root string
	// Log receives progress lines; default io.Discard.
	Log io.Writer
	// Kubelets makes the nodes real: containerd, runc and a kubelet in every
	// node namespace, kube-controller-manager and kube-scheduler beside the API
	// server, which then serves on the in-cluster address (see kubelet.go).
	Kubelets bool
	// APIServer is the API server binary in _out/bin; default kube-apiserver
	// (the pinned version). kube-apiserver-1.30 is the oldest the chart claims.
	APIServer string
}

// World is one running test world.
type World struct {
	ID  string
	Dir string
	Net *Network
	API *ControlPlane
	// Kubelets are the real nodes, with Options.Kubelets.
	Kubelets []*Kubelet
	// WriterEnv is added to the environment of every writer the world starts
	// (the benchmarks set the shipped Deployment's, ShippedWriterEnv).
	WriterEnv []string
	// AgentArgs are added to the arguments of every agent the world starts
	// (the benchmarks set --corroboration).
	AgentArgs []string

	kubelets  bool
	apiServer string // Options.APIServer
	closed    bool
	log       io.Writer
	repo      string
	mu        sync.Mutex
	state     state
	procs     []*exec.Cmd
}

// state is what teardown needs, kept on disk so `world down` can clean up after a
// test binary that died.
type state struct {
	ID         string   `json:"id"`
	Owner      int      `json:"owner"` // the process that started the world
	Namespaces []string `json:"namespaces"`
	PIDs       []int    `json:"pids"`
	// Real nodes: their cgroup roots.
	CgroupRoots []string `json:"cgroupRoots,omitempty"`
}

// ErrNotRoot is returned by Start when the caller cannot create namespaces.
var ErrNotRoot = errors.New("world: needs root (network namespaces, radvd)")

// Require reports why a world cannot start here, or nil.
func Require() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	for _, tool := range []string{"ip", "radvd", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("world: %s not found (run `make deps`): %w", tool, err)
		}
	}
	return nil
}

// Start builds a world. On error everything already made is torn down.
func Start(ctx context.Context, opts Options) (w *World, err error) {
	if err := Require(); err != nil {
		return nil, err
	}
	repo, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if opts.Root == "" {
		opts.Root = filepath.Join(repo, "_out", "worlds")
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	// The ID names the world's directory, namespaces and ULA prefix; worlds
	// run side by side, so it must be one no world holds.
	if err := os.MkdirAll(opts.Root, 0o700); err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	var id string
	for {
		idb := make([]byte, 2)
		_, _ = rand.Read(idb)
		id = hex.EncodeToString(idb)
		err := os.Mkdir(filepath.Join(opts.Root, id), 0o700)
		if err == nil {
			if !networkLeft(id) {
				break
			}
			_ = os.Remove(filepath.Join(opts.Root, id))
			continue
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("world: %w", err)
		}
	}
	if opts.Kubelets {
		if opts.NoControlPlane {
			return nil, errors.New("world: real nodes need the control plane")
		}
		if err := RequireKubelets(); err != nil {
			return nil, err
		}
	}
	w = &World{ID: id, Dir: filepath.Join(opts.Root, id), log: opts.Log, repo: repo, kubelets: opts.Kubelets, apiServer: opts.APIServer,
		state: state{ID: id, Owner: os.Getpid()}}
	created := w // the error returns below set w to nil before this runs
	defer func() {
		if err != nil {
			created.Close()
			w = nil
		}
	}()
	start := time.Now()
	if w.Net, err = newNetwork(ctx, w, opts.Nodes); err != nil {
		return nil, fmt.Errorf("world: network: %w", err)
	}
	w.logf("network up: bridge, router, %d nodes (%s)", opts.Nodes, time.Since(start).Round(time.Millisecond))
	if !opts.NoControlPlane {
		t := time.Now()
		if w.API, err = startControlPlane(ctx, w); err != nil {
			return nil, fmt.Errorf("world: control plane: %w", err)
		}
		w.logf("API server ready at %s (%s)", w.API.URL, time.Since(t).Round(time.Millisecond))
		if opts.Kubelets {
			t := time.Now()
			if err := w.startNodes(ctx); err != nil {
				return nil, fmt.Errorf("world: real nodes: %w", err)
			}
			w.logf("%d real nodes Ready (%s)", len(w.Kubelets), time.Since(t).Round(time.Millisecond))
			return w, nil
		}
		for _, n := range w.Net.Nodes {
			if err := w.API.CreateNode(ctx, n.Name); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// Close tears the world down: processes by recorded PID, then namespaces.
func (w *World) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	procs := w.procs
	w.procs = nil
	w.mu.Unlock()
	for _, c := range procs {
		if c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		}
	}
	for _, c := range procs {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	// Every spawned process is reaped by now: its PID may already belong to
	// someone else, so teardown must not signal it again.
	w.mu.Lock()
	st := w.state
	st.PIDs = nil
	w.mu.Unlock()
	teardown(st)
	if os.Getenv("WORLD_KEEP") == "" { // WORLD_KEEP=1 keeps the logs of a failed test to read
		_ = os.RemoveAll(w.Dir)
	}
}

// teardown kills every process left in the world's namespaces and deletes them.
// It never signals its own process.
func teardown(s state) {
	self := os.Getpid()
	for _, pid := range s.PIDs {
		if pid != self && alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Real nodes: the containers outlive containerd (its shims, in the node's
	// network namespace, go with the namespaces below).
	for _, root := range s.CgroupRoots {
		removeCgroupRoot(root)
	}
	if len(s.CgroupRoots) > 0 {
		restoreSysctls()
	}
	// The root namespace's end of the bridge goes first and at once: deleting
	// the namespace that holds its peer frees it only when the kernel's
	// cleanup gets to it, and a world started before then with the same ID
	// failed to create it ("File exists").
	_ = exec.Command("ip", "link", "del", hostLink(s.ID)).Run()
	for i := len(s.Namespaces) - 1; i >= 0; i-- {
		ns := s.Namespaces[i]
		if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
			for _, f := range strings.Fields(string(out)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil && pid != self {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
}

// networkLeft reports whether links or namespaces named for world id are
// still there (a world whose test was killed, or one whose namespaces the
// kernel has not yet cleaned up): a new world with that ID would collide
// with them.
func networkLeft(id string) bool {
	if _, err := os.Stat("/sys/class/net/" + hostLink(id)); err == nil {
		return true
	}
	left, _ := filepath.Glob("/run/netns/rn" + id + "-*")
	return len(left) > 0
}

// Down tears down every world recorded under root. A world whose owner still runs
// is asked to close itself first (SIGTERM), so its processes are reaped.
func Down(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "state.json"))
		if err != nil {
			continue
		}
		var s state
		if json.Unmarshal(b, &s) != nil {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if s.Owner > 0 && s.Owner != os.Getpid() && syscall.Kill(s.Owner, syscall.SIGTERM) == nil {
			for range 100 {
				if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		teardown(s)
		_ = os.RemoveAll(dir)
		gone = append(gone, s.ID)
	}
	return gone, nil
}

// alive reports whether pid exists and is not a zombie (a recorded PID that was
// already reaped may have been reused).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func (w *World) record(f func(*state)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.state)
	b, _ := json.Marshal(w.state)
	_ = os.WriteFile(filepath.Join(w.Dir, "state.json"), b, 0o600)
}

// spawn starts a long-running process (optionally inside namespace ns), in its own
// process group, with output to logName under the world directory.
func (w *World) spawn(ns, logName string, argv ...string) (*exec.Cmd, error) {
	return w.spawnEnv(ns, logName, nil, argv...)
}

// spawnEnv is spawn with env added to the process's environment.
func (w *World) spawnEnv(ns, logName string, env []string, argv ...string) (*exec.Cmd, error) {
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	logf, err := os.OpenFile(filepath.Join(w.Dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	logf.Close()
	w.mu.Lock()
	w.procs = append(w.procs, cmd)
	w.mu.Unlock()
	w.record(func(s *state) { s.PIDs = append(s.PIDs, cmd.Process.Pid) })
	return cmd, nil
}

// Spawn runs argv as a background process in node's namespace (or the root
// namespace for node ""), logging to <world>/<logName>. Stopped by Close.
func (w *World) Spawn(node, logName string, argv ...string) (*exec.Cmd, error) {
	ns := ""
	if node != "" {
		n, err := w.Net.Node(node)
		if err != nil {
			return nil, err
		}
		ns = n.NS
	}
	return w.spawn(ns, logName, argv...)
}

// Stop ends a process started with Spawn (SIGTERM, then SIGKILL after grace).
func (w *World) Stop(cmd *exec.Cmd, grace time.Duration) {
	w.mu.Lock()
	for i, c := range w.procs {
		if c == cmd {
			w.procs = append(w.procs[:i], w.procs[i+1:]...)
			break
		}
	}
	w.mu.Unlock()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func (w *World) logf(format string, args ...any) {
	fmt.Fprintf(w.log, "world %s: "+format+"\n", append([]any{w.ID}, args...)...)
}

// Bin finds a binary built by `make tools build` (kube-apiserver, etcd, agent,
// writer) under $RENUMBER_BIN or <repo>/_out/bin.
func Bin(name string) (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("world: %s not built (run `make tools build`): %w", p, err)
	}
	return p, nil
}

func binDir() (string, error) {
	if dir := os.Getenv("RENUMBER_BIN"); dir != "" {
		return dir, nil
	}
	repo, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(repo, "_out", "bin"), nil
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// RepoRoot finds the directory holding this project's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/renumber/renumber\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("world: not inside the renumber repository")
		}
		dir = parent
	}
}

func run(ctx context.Context, argv ...string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
