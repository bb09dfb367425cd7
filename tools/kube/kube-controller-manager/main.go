// Command kube-controller-manager is the upstream controller manager, built
// from the module proxy at the version pinned in go.mod: the world's real nodes
// need its DaemonSet, Deployment, ServiceAccount and root-CA controllers.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
