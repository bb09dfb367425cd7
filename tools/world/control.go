package world

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ControlPlane is a real etcd and kube-apiserver serving the world.
type ControlPlane struct {
	w         *World
	URL       string
	Admin     *rest.Config
	AdminFile string // kubeconfig for a person (kubectl --kubeconfig)
	AuditLog  string
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface
	pki       *pki
	etcd      *exec.Cmd
	apiserver *exec.Cmd
	apiArgs   []string
	etcdArgs  []string
}

// auditPolicy is shared with the kind cluster (e2e/kind/kind-config.yaml).
//
//go:embed audit-policy.yaml
var auditPolicy string

func startControlPlane(ctx context.Context, w *World) (*ControlPlane, error) {
	name := "kube-apiserver"
	if w.apiServer != "" {
		name = w.apiServer
	}
	apiserverBin, err := Bin(name)
	if err != nil {
		return nil, err
	}
	etcdBin, err := Bin("etcd")
	if err != nil {
		return nil, err
	}
	host := w.Net.HostAddr
	serverIPs := []net.IP{host.AsSlice(), net.IPv4(127, 0, 0, 1)}
	if w.kubelets {
		// Pods reach the API server at the `kubernetes` Service's ClusterIP.
		host = w.Net.ServiceAddr()
		serverIPs = append(serverIPs, host.AsSlice())
		if err := w.Net.addServiceAddr(ctx); err != nil {
			return nil, err
		}
	}
	p, err := newPKI(w.Dir, serverIPs)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{w: w, pki: p, AuditLog: filepath.Join(w.Dir, "audit.log")}

	client, err := loopbackAddr()
	if err != nil {
		return nil, err
	}
	peer, err := loopbackAddr()
	if err != nil {
		return nil, err
	}
	etcdURL := "http://" + client.String()
	peerURL := "http://" + peer.String()
	cp.etcdArgs = []string{etcdBin,
		"--name", "world", "--data-dir", filepath.Join(w.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "world=" + peerURL, "--unsafe-no-fsync", "--log-level", "warn"}
	if cp.etcd, err = w.spawn("", "etcd.log", cp.etcdArgs...); err != nil {
		return nil, err
	}

	port := 443 // the `kubernetes` Service's port
	if !w.kubelets {
		if port, err = freePort(host.String()); err != nil {
			return nil, err
		}
	}
	cp.URL = "https://" + netip.AddrPortFrom(host, uint16(port)).String()
	policy := filepath.Join(w.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	cp.apiArgs = []string{apiserverBin,
		"--etcd-servers", etcdURL,
		"--bind-address", host.String(), "--advertise-address", host.String(), "--secure-port", strconv.Itoa(port),
		"--tls-cert-file", p.ServingCert, "--tls-private-key-file", p.ServingKey,
		"--client-ca-file", p.CAFile,
		"--service-account-key-file", p.SAPublicKey, "--service-account-signing-key-file", p.SASignerKey,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--authorization-mode", "RBAC",
		"--service-cluster-ip-range", "10.96.0.0/16,fd72:6e75:" + w.ID + ":ffff::/112",
		"--endpoint-reconciler-type", "none",
		"--disable-admission-plugins", "ServiceAccount",
		"--audit-log-path", cp.AuditLog, "--audit-policy-file", policy, "--audit-log-format", "json",
		"--audit-log-mode", "blocking",
		"--profiling=false", "--cert-dir", filepath.Join(w.Dir, "certs"),
		"--v", "1",
	}
	if w.kubelets {
		cp.apiArgs = withArgs(cp.apiArgs, map[string]string{
			"--service-cluster-ip-range":  w.Net.ServiceRange().String(),
			"--authorization-mode":        "Node,RBAC",
			"--disable-admission-plugins": "",
		})
		cp.apiArgs = append(cp.apiArgs, "--enable-admission-plugins", "NodeRestriction",
			"--kubelet-preferred-address-types", "InternalIP",
			"--kubelet-client-certificate", p.AdminCert, "--kubelet-client-key", p.AdminKey)
	}
	if err := cp.startAPIServer(); err != nil {
		return nil, err
	}
	cp.Admin = &rest.Config{
		Host:            cp.URL,
		TLSClientConfig: rest.TLSClientConfig{CAFile: p.CAFile, CertFile: p.AdminCert, KeyFile: p.AdminKey},
		QPS:             100, Burst: 200,
	}
	// The credentials read into the config as data: client-go watches a client
	// certificate it has only by file name, and after the world's directory is
	// removed its watcher logged a failure every second for the rest of the
	// test binary's run.
	if err := rest.LoadTLSFiles(cp.Admin); err != nil {
		return nil, err
	}
	if cp.Client, err = kubernetes.NewForConfig(cp.Admin); err != nil {
		return nil, err
	}
	if cp.Dynamic, err = dynamic.NewForConfig(cp.Admin); err != nil {
		return nil, err
	}
	if err := cp.WaitReady(ctx, time.Minute); err != nil {
		return nil, err
	}
	cp.AdminFile = filepath.Join(w.Dir, "admin.kubeconfig")
	if err := cp.writeKubeconfig(cp.AdminFile, "world-admin", map[string]string{
		"client-certificate": p.AdminCert, "client-key": p.AdminKey}); err != nil {
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) startAPIServer() error {
	cmd, err := cp.w.spawn("", "kube-apiserver.log", cp.apiArgs...)
	cp.apiserver = cmd
	return err
}

// WaitReady polls /readyz until it answers ok.
func (cp *ControlPlane) WaitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last error
	for {
		body, err := cp.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("API server not ready (see %s): %w", filepath.Join(cp.w.Dir, "kube-apiserver.log"), errors.Join(ctx.Err(), last))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Pause stops (SIGSTOP) or resumes (SIGCONT) the API server process: a stalled
// API server, as during a storage stall.
func (cp *ControlPlane) Pause(stop bool) error {
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	return cp.apiserver.Process.Signal(sig)
}

// StopEtcd stops etcd under the running API server (SIGTERM).
func (cp *ControlPlane) StopEtcd() error {
	if cp.etcd == nil {
		return errors.New("world: etcd is not running")
	}
	cp.w.Stop(cp.etcd, 10*time.Second)
	cp.etcd = nil
	return nil
}

// StartEtcd starts etcd again on the same data and waits for the API server to
// be ready.
func (cp *ControlPlane) StartEtcd(ctx context.Context) error {
	var err error
	if cp.etcd, err = cp.w.spawn("", "etcd.log", cp.etcdArgs...); err != nil {
		return err
	}
	return cp.WaitReady(ctx, time.Minute)
}

// CreateNode creates a Node object (no kubelet runs; the object is enough).
func (cp *ControlPlane) CreateNode(ctx context.Context, name string) error {
	_, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %q: %w", name, err)
	}
	return nil
}

// withArgs replaces the values of flags already in argv ("" drops the flag).
func withArgs(argv []string, set map[string]string) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		if v, ok := set[argv[i]]; ok && i+1 < len(argv) {
			if v != "" {
				out = append(out, argv[i], v)
			}
			i++
			continue
		}
		out = append(out, argv[i])
	}
	return out
}
