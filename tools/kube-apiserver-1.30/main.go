// Command kube-apiserver is the upstream Kubernetes API server at the oldest
// minor the chart claims (Chart.yaml kubeVersion), built from the module proxy:
// the CRD and the admission policies are applied to it in make test, so the
// claim is one that ran.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
