// RESTConfig, Counted and NewClients build the writer's client-go clients: every request counted
// (verb, resource, code) and every mutating request passing a gate that closes
// the moment leadership is lost (requests.Counting).

package controller

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/dynamic"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/internal/requests"
)

// RESTConfig loads a kubeconfig file, or the in-cluster config when path is "".
func RESTConfig(path, userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		return nil, fmt.Errorf("kube: loading client config: %w", err)
	}
	cfg.UserAgent = userAgent
	// client-go's default (5/s, burst 10) would spread a renumbering that patches
	// a hundred HA Services over twenty seconds. The write budget, not the client
	// limiter, is what keeps our writes in check.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Counted returns a copy of cfg whose requests are counted in c, and refused when
// gate is non-nil and closed.
func Counted(cfg *rest.Config, c *metrics.CounterVec, gate requests.Gate) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return requests.Counting(rt, c, gate)
	})
	return out
}

// Clients are the writer's clients behind the leader gate.
type Clients struct {
	Dynamic   dynamic.Interface
	Metadata  metadata.Interface
	Core      corev1client.CoreV1Interface // typed, protobuf: Nodes and Services
	Apps      appsv1client.AppsV1Interface // typed, protobuf: the Cilium DaemonSet
	Events    eventsv1client.EventsGetter
	Discovery *Discovery
}

// NewClients builds every client the writer writes with from gated, a config
// whose writes pass the leader gate. Typed clients per API group, not the whole
// clientset, and Discovery instead of client-go's: the clientset made
// every group's client code reachable (with the discovery client, 8 MB of
// binary and of RSS).
func NewClients(gated *rest.Config) (Clients, error) {
	var c Clients
	var err error
	if c.Dynamic, err = dynamic.NewForConfig(gated); err != nil {
		return c, err
	}
	if c.Metadata, err = metadata.NewForConfig(gated); err != nil {
		return c, err
	}
	if c.Discovery, err = NewDiscovery(gated); err != nil {
		return c, err
	}
	if c.Events, err = eventsv1client.NewForConfig(gated); err != nil {
		return c, err
	}
	proto := rest.CopyConfig(gated)
	proto.ContentType = "application/vnd.kubernetes.protobuf"
	proto.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if c.Core, err = corev1client.NewForConfig(proto); err != nil {
		return c, err
	}
	c.Apps, err = appsv1client.NewForConfig(proto)
	return c, err
}
