// Command kind is kind (kubernetes-sigs/kind), built from the module proxy at the
// version pinned in go.mod, for `make e2e-kind`: users need Docker, not kind.
package main

import "sigs.k8s.io/kind/cmd/kind/app"

func main() { app.Main() }
