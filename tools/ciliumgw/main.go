// Command ciliumgw runs Cilium's own Gateway API controller (the cell
// cilium-operator runs, github.com/cilium/cilium/operator/pkg/gateway-api at
// the version the root go.mod pins) against a kubeconfig's API server, and
// nothing else of Cilium: the test world's real translation of a Gateway into
// the Service (and CiliumEnvoyConfig) it generates. No Envoy runs, so nothing
// answers on the addresses; LB-IPAM (tools/lbipam) assigns them, and the
// controller reports them in the Gateway's status.
//
// sigs.k8s.io/mcs-api/controllers v0.5.2, which Cilium's Gateway helpers
// import for one constant, is refused by the module proxy: mcsstub stands in.
package main

import (
	"log/slog"
	"os"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	operatorOption "github.com/cilium/cilium/operator/option"
	"github.com/cilium/cilium/operator/pkg/ciliumenvoyconfig"
	controllerruntime "github.com/cilium/cilium/operator/pkg/controller-runtime"
	gatewayapi "github.com/cilium/cilium/operator/pkg/gateway-api"
	mcsapitypes "github.com/cilium/cilium/pkg/clustermesh/mcsapi/types"
	"github.com/cilium/cilium/pkg/hive"
	k8sClient "github.com/cilium/cilium/pkg/k8s/client"
	"github.com/cilium/cilium/pkg/option"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	option.Config.EnableIPv6 = true
	option.Config.EnableIPv4 = true
	operatorOption.Config.EnableGatewayAPI = true
	operatorOption.Config.KubeProxyReplacement = true
	h := hive.New(
		k8sClient.Cell,
		controllerruntime.Cell,
		cell.Provide(
			func() *option.DaemonConfig { return option.Config },
			func() *operatorOption.OperatorConfig { return operatorOption.Config },
			func() mcsapitypes.MCSAPIConfig { return mcsapitypes.MCSAPIConfig{} },
			func() ciliumenvoyconfig.EnvoyProxyTimeouts { return ciliumenvoyconfig.EnvoyProxyTimeouts{} },
		),
		gatewayapi.Cell,
	)
	h.RegisterFlags(pflag.CommandLine)
	pflag.Parse()
	if err := h.Run(log); err != nil {
		log.Error("gateway controller stopped", "err", err)
		os.Exit(1)
	}
}
