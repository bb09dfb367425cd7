// Command kindnet is the Pod network of the offline kind node image
// (tools/kind/node-image.sh), standing in for kind's kindnetd, whose module the
// proxy here does not serve. It does what kindnetd does for a dual-stack
// cluster and nothing more: on each node (a hostNetwork DaemonSet) it writes
// the CNI configuration for the node's Pod CIDRs (ptp + host-local + portmap,
// the plugins the image ships) and routes every other node's Pod CIDRs via that
// node's address of the same family. It re-reads the Nodes every few seconds;
// a pass that finds nothing changed changes nothing. Test clusters only.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const confPath = "/etc/cni/net.d/10-kindnet.conflist"

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, os.Getenv("NODE_NAME")); err != nil {
		log.Error("kindnet", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, self string) error {
	if self == "" {
		return fmt.Errorf("NODE_NAME is not set")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, s := range []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"} {
		if err := os.WriteFile(filepath.Join("/proc/sys", s), []byte("1"), 0o644); err != nil {
			return fmt.Errorf("enabling forwarding: %w", err)
		}
	}
	var applied []Route
	for {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			var want Plan
			if want, err = PlanFor(self, nodes.Items); err == nil {
				if err = writeConf(want.Conf); err == nil {
					applied, err = syncRoutes(log, applied, want.Routes)
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("kindnet pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Second):
		}
	}
}

// Route sends one Pod CIDR of another node to that node's address.
type Route struct {
	Dst netip.Prefix
	Via netip.Addr
}

// Plan is what this node needs: its CNI configuration and its routes.
type Plan struct {
	Conf   []byte // nil while the node has no Pod CIDR yet
	Routes []Route
}

// PlanFor computes the plan of node self from every Node.
func PlanFor(self string, nodes []corev1.Node) (Plan, error) {
	var p Plan
	for _, n := range nodes {
		cidrs, err := podCIDRs(n)
		if err != nil {
			return Plan{}, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if n.Name == self {
			if len(cidrs) > 0 {
				p.Conf = Conf(cidrs)
			}
			continue
		}
		for _, c := range cidrs {
			if via, ok := nodeAddr(n, c.Addr().Is4()); ok {
				p.Routes = append(p.Routes, Route{Dst: c, Via: via})
			}
		}
	}
	slices.SortFunc(p.Routes, func(a, b Route) int { return a.Dst.Addr().Compare(b.Dst.Addr()) })
	return p, nil
}

func podCIDRs(n corev1.Node) ([]netip.Prefix, error) {
	raw := n.Spec.PodCIDRs
	if len(raw) == 0 && n.Spec.PodCIDR != "" {
		raw = []string{n.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, s := range raw {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func nodeAddr(n corev1.Node, v4 bool) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() == v4 {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// Conf is the CNI configuration list for a node's Pod CIDRs.
func Conf(cidrs []netip.Prefix) []byte {
	var ranges [][]map[string]string
	routes := []map[string]string{}
	for _, c := range cidrs {
		ranges = append(ranges, []map[string]string{{"subnet": c.String()}})
		def := "0.0.0.0/0"
		if c.Addr().Is6() {
			def = "::/0"
		}
		routes = append(routes, map[string]string{"dst": def})
	}
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "kindnet",
		"plugins": []any{
			map[string]any{
				"type": "ptp", "ipMasq": false, "mtu": 1500,
				"ipam": map[string]any{"type": "host-local", "dataDir": "/run/cni-ipam-state", "ranges": ranges, "routes": routes},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	return append(b, '\n')
}

func writeConf(conf []byte) error {
	if conf == nil {
		return nil
	}
	if old, err := os.ReadFile(confPath); err == nil && bytes.Equal(old, conf) {
		return nil
	}
	tmp := confPath + ".tmp"
	if err := os.WriteFile(tmp, conf, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, confPath)
}
