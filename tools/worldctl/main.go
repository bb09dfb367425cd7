// Command worldctl starts and stops the local test world for a person to explore:
//
//	worldctl up [--nodes 3] [--kubelets] [--install kustomize|helm]
//	                          start a world in the background and print how to use it
//	worldctl down             tear down every world under _out/worlds
//
// With --kubelets the nodes are real (kubelet, containerd, runc) and the
// install - manifests/ or the Helm chart - runs on them as Pods.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/renumber/renumber/tools/world"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: worldctl up [--nodes N] [--kubelets] [--install kustomize|helm] | down")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "serve":
		err = serve(os.Args[2:])
	case "down":
		err = down()
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worldctl:", err)
		os.Exit(1)
	}
}

func root() (string, error) {
	repo, err := world.RepoRoot()
	return filepath.Join(repo, "_out", "worlds"), err
}

// up re-executes itself as "serve" in a new session and waits for its report.
func up(args []string) error {
	r, err := root()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r, 0o700); err != nil {
		return err
	}
	report := filepath.Join(r, fmt.Sprintf("up-%d.txt", os.Getpid()))
	logf, err := os.Create(report + ".log")
	if err != nil {
		return err
	}
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--report", report}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			b, _ := os.ReadFile(report + ".log")
			_ = os.Remove(report + ".log")
			return fmt.Errorf("world did not start: %v\n%s", err, b)
		case <-time.After(100 * time.Millisecond):
		}
		if b, err := os.ReadFile(report); err == nil {
			fmt.Print(string(b))
			_ = os.Remove(report)
			_ = os.Remove(report + ".log")
			return nil
		}
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	nodes := fs.Int("nodes", 3, "node namespaces")
	report := fs.String("report", "", "file to write the summary to once ready")
	kubelets := fs.Bool("kubelets", false, "real nodes: kubelet, containerd and runc in every node namespace")
	install := fs.String("install", "kustomize", "with --kubelets: install with kustomize (manifests/) or helm (charts/renumber)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	w, err := world.Start(ctx, world.Options{Nodes: *nodes, Kubelets: *kubelets, Log: os.Stderr})
	if err != nil {
		return err
	}
	defer w.Close()
	if *kubelets {
		return serveReal(ctx, w, *install, *report)
	}
	if err := errors.Join(w.API.InstallCRDs(ctx), w.API.InstallRBAC(ctx)); err != nil {
		return err
	}
	writer, err := w.API.ServiceAccount(ctx, "renumber-writer", "")
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "World %s is up (%d nodes, router advertising 2001:db8:1:100::/64).\n\n", w.ID, *nodes)
	fmt.Fprintf(&b, "  kubectl --kubeconfig %s get nodes\n", w.API.AdminFile)
	fmt.Fprintf(&b, "  writer identity:  %s\n", writer.Kubeconfig)
	for _, n := range w.Net.Nodes {
		agent, err := w.API.ServiceAccount(ctx, "renumber-agent", n.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "  %s: ip netns exec %s bash    (agent identity: %s)\n", n.Name, n.NS, agent.Kubeconfig)
	}
	fmt.Fprintf(&b, "  router: ip netns exec %s bash    (radvd config: %s/radvd-rt.conf)\n", w.Net.Router.NS, w.Dir)
	fmt.Fprintf(&b, "  audit log: %s\n\nStop it with: make world-down\n", w.API.AuditLog)
	if err := w.Net.Router.Advertise(ctx, world.Advert{
		Prefix: netip.MustParsePrefix("2001:db8:1:100::/64"), Valid: time.Hour, Preferred: 30 * time.Minute,
	}); err != nil {
		return err
	}
	if err := os.WriteFile(*report, []byte(b.String()), 0o600); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// serveReal installs renumber on the real nodes and reports how to watch it.
func serveReal(ctx context.Context, w *world.World, install, report string) error {
	if err := w.Install(ctx, install); err != nil {
		return err
	}
	if err := w.Net.Router.Advertise(ctx, world.Advert{
		Prefix: netip.MustParsePrefix("2001:db8:1:100::/64"), Valid: time.Hour, Preferred: 30 * time.Minute,
	}); err != nil {
		return err
	}
	if err := w.WaitInstalled(ctx, 3*time.Minute); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "World %s is up: %d real nodes, renumber installed with %s, router advertising 2001:db8:1:100::/64.\n\n", w.ID, len(w.Kubelets), install)
	fmt.Fprintf(&b, "  export KUBECONFIG=%s\n  kubectl get nodes,pods -A -o wide\n  _out/bin/kubectl-renumber status\n", w.API.AdminFile)
	for _, k := range w.Kubelets {
		fmt.Fprintf(&b, "  %s: ip netns exec %s bash    (kubelet log: %s/kubelet-%s.log)\n", k.Node.Name, k.Node.NS, w.Dir, k.Node.Name)
	}
	fmt.Fprintf(&b, "  router: ip netns exec %s bash    (radvd config: %s/radvd-rt.conf)\n", w.Net.Router.NS, w.Dir)
	fmt.Fprintf(&b, "  audit log: %s\n\nStop it with: make world-down\n", w.API.AuditLog)
	if err := os.WriteFile(report, []byte(b.String()), 0o600); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func down() error {
	r, err := root()
	if err != nil {
		return err
	}
	gone, err := world.Down(r)
	for _, id := range gone {
		fmt.Println("world", id, "torn down")
	}
	if len(gone) == 0 {
		fmt.Println("no worlds running")
	}
	return err
}
