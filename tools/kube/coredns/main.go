// Command coredns is upstream CoreDNS, built from the module proxy at the
// version pinned in go.mod, with only the plugins its two users name: the
// Corefile kubeadm writes for kind's cluster DNS (errors, health, ready,
// kubernetes, prometheus, forward, cache, loop, reload, loadbalance) and the
// test world's name servers (bind, hosts, log; template for a server that
// answers a whole CNAME chain in one message). The full build's cloud plugins
// (route53, azure, clouddns, ...) would bring the AWS, Azure and Google SDKs
// to compile, which nothing here uses.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() {
	coremain.Run()
}
