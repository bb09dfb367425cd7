// Package cilium is the only package that touches Cilium's Go API types. It
// describes CiliumLoadBalancerIPPools and CiliumCIDRGroups as backend.Kinds and
// renders CiliumBGPAdvertisements. It speaks cilium.io/v2, or v2alpha1 on
// clusters that serve only that (Cilium <= 1.17), through the dynamic client with
// Cilium's own types for (de)serialisation.
package backends
