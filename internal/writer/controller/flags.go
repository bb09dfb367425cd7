package controller

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// Flags registers the writer's flags that decide what it writes (shared by
// the writer and kubectl renumber status, which must decide alike).
func (o *Options) Flags(fs *flag.FlagSet) {
	r := &o.Reconcile
	fs.DurationVar(&r.Debounce, "debounce", 100*time.Millisecond, "how long to gather node digest changes into one pass")
	fs.DurationVar(&r.StatusSeen, "status-seen-wait", 2*time.Second, "after a status names a new prefix, wait up to this long for the API server to admit a dry run of the first pool write in it before writing objects in the prefix (its admission policy reads the status from a cache); the pass is queued again, never waits in place")
	fs.DurationVar(&o.NodeGrace, "node-not-ready-grace", 5*time.Minute, "a Node not Ready for longer stops voting for prefixes (0: Nodes always vote, and only their metadata is watched)")
	fs.DurationVar(&o.NodeStartupWait, "node-startup-wait", decide.StartupWait, "how long a Node without a digest is awaited, from when the writer first sees it, by the first adoption of a prefix (a majority of the Nodes reporting and awaited decides it; 0: only those reporting)")
	fs.DurationVar(&decide.ConfirmWithin, "dhcpv6-confirm-within", decide.ConfirmWithin, "how long the agents' DHCPv6 client and the node confirming its delegation may disagree before the roles rotate (status.dhcpv6pd): longer than a confirmer takes to solicit, and than the lease's T1 where it can")
	r.Budget.Flags(fs)
	r.TargetKeys = holdings.DefaultTargetKeys
	fs.Func("external-dns-target-annotation-keys", "comma-separated annotation keys HA Services get their DNS target under, in order; a key dropped from the list is released (default "+strings.Join(holdings.DefaultTargetKeys, ",")+")",
		func(v string) error { r.TargetKeys = holdings.Split(v); return nil })
	fs.StringVar(&o.L2Nudge, "l2-nudge", "auto", "touch HA Services once when their load balancer publishes a new address, for Cilium's L2 announcer (before v1.20.1 it misses added addresses): auto (from the Cilium DaemonSet's image), always or never")
	fs.StringVar(&o.CiliumNamespace, "cilium-namespace", "kube-system", "namespace of the Cilium DaemonSet (labelled "+backends.DaemonSetSelector+"), read with --l2-nudge=auto")
	fs.StringVar(&o.KubeVIP, "kube-vip-configmap", "", "follow the kube-vip cloud provider's pool ConfigMap, as namespace/name (usually "+backends.DefaultKubeVIPConfigMap+"; needs the Role in manifests/kube-vip); empty: not followed")
}

// Validate checks the flags Flags registered.
func (o Options) Validate() error {
	err := errors.Join(o.Reconcile.Budget.Validate(), holdings.CheckTargetKeys(o.Reconcile.TargetKeys))
	if o.KubeVIP != "" {
		err = errors.Join(err, backends.CheckKubeVIPConfigMap(o.KubeVIP))
	}
	if !slices.Contains(backends.L2NudgeModes, o.L2Nudge) {
		err = errors.Join(err, fmt.Errorf("--l2-nudge %q: want one of %s", o.L2Nudge, strings.Join(backends.L2NudgeModes, ", ")))
	}
	return err
}
