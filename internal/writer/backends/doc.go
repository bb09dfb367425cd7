// Package backends describes each kind of object that follows a
// DynamicPrefix, one file per backend, as what the writer reads and renders
// there: where a pool kind keeps its entries and which annotation records
// ours (backend.go: Kind), Cilium's CiliumLoadBalancerIPPools and
// CiliumCIDRGroups, its CiliumBGPAdvertisements and the L2 announcer nudge
// (cilium*.go), MetalLB's IPAddressPool (metallb.go), Calico's IPPool and its
// draining siblings (calico.go), and the kube-vip cloud provider's ConfigMap
// (kubevip.go). declare.go is the one list of pool kinds: what the writer
// discovers, and what each needs of the API, which a test holds the shipped
// RBAC and admission policies to.
//
// It is the only package that touches Cilium's Go API types. It speaks
// cilium.io/v2, or v2alpha1 on clusters that serve only that (Cilium <= 1.17),
// through the dynamic client with Cilium's own types for (de)serialisation.
// It writes nothing: package apply makes every write.
package backends
