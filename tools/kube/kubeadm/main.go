// Command kubeadm is the upstream kubeadm, built from the module proxy at the
// version pinned in go.mod, for the offline kind node image (tools/kind).
package main

import (
	"k8s.io/kubernetes/cmd/kubeadm/app"
	kubeadmerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
)

func main() { kubeadmerrors.HandleError(app.Run()) }
