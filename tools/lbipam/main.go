// Command lbipam runs Cilium's own LB-IPAM (the cell cilium-operator runs,
// github.com/cilium/cilium/operator/pkg/lbipam at the version the root go.mod
// pins) against a kubeconfig's API server, and nothing else of Cilium: the
// test world's real consumer of the pools and Service annotations renumber
// writes. It allocates Service addresses from CiliumLoadBalancerIPPools and
// writes status.loadBalancer.ingress, as in a cluster.
package main

import (
	"log/slog"
	"os"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	"github.com/cilium/cilium/operator/pkg/lbipam"
	"github.com/cilium/cilium/pkg/hive"
	"github.com/cilium/cilium/pkg/k8s"
	cilium_api_v2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	k8sClient "github.com/cilium/cilium/pkg/k8s/client"
	"github.com/cilium/cilium/pkg/k8s/resource"
	slim_core_v1 "github.com/cilium/cilium/pkg/k8s/slim/k8s/api/core/v1"
	"github.com/cilium/cilium/pkg/k8s/utils"
	"github.com/cilium/cilium/pkg/option"
	"k8s.io/client-go/util/workqueue"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	option.Config.EnableIPv6 = true
	option.Config.EnableIPv4 = true
	h := hive.New(
		k8sClient.Cell,
		cell.Provide(
			func() *option.DaemonConfig { return option.Config },
			func() k8s.Config { return k8s.DefaultConfig },
			func() k8s.ServiceWatchConfig { return k8s.ServiceWatchConfig{} },
			func(lc cell.Lifecycle, cs k8sClient.Clientset, mp workqueue.MetricsProvider) (resource.Resource[*cilium_api_v2.CiliumLoadBalancerIPPool], error) {
				lw := utils.ListerWatcherFromTyped(cs.CiliumV2().CiliumLoadBalancerIPPools())
				return resource.New[*cilium_api_v2.CiliumLoadBalancerIPPool](lc, lw, mp), nil
			},
			func(lc cell.Lifecycle, cfg k8s.ConfigParams, cs k8sClient.Clientset, mp workqueue.MetricsProvider) (resource.Resource[*slim_core_v1.Service], error) {
				return k8s.ServiceResource(lc, cfg, cs, mp)
			},
		),
		lbipam.Cell,
	)
	h.RegisterFlags(pflag.CommandLine)
	pflag.Parse()
	if err := h.Run(log); err != nil {
		log.Error("lbipam stopped", "err", err)
		os.Exit(1)
	}
}
