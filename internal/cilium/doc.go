// Package cilium is the only package that touches Cilium's Go API types. It reads
// and patches CiliumLoadBalancerIPPools and CiliumCIDRGroups for the writer.
package cilium

import (
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
)

var _ ciliumv2.CiliumLoadBalancerIPPool
