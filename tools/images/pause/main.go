// Command pause is the sandbox image of the test world's real nodes (containerd
// holds each Pod's namespaces with it): it waits for a signal and exits 0. It
// is never shipped.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
