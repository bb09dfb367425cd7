// Package dynamicprefix holds the dynamic-prefix.io/v1alpha1 DynamicPrefix API
// types (field-compatible with the operator users already run) and the
// annotation keys of that API. It only describes the wire format: defaults and
// validation live in package spec, which parses a Spec into the model every
// part of the writer reads.
package dynamicprefix

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, version and resource served by manifests/crds/dynamicprefixes.yaml.
var GVR = schema.GroupVersionResource{Group: "dynamic-prefix.io", Version: "v1alpha1", Resource: "dynamicprefixes"}

// Annotations read on pools and Services, and the ownership records written.
const (
	AnnotationName         = "dynamic-prefix.io/name"
	AnnotationAddressRange = "dynamic-prefix.io/address-range"
	AnnotationSubnet       = "dynamic-prefix.io/subnet"
	AnnotationManagedBlock = "dynamic-prefix.io/managed-blocks"
	AnnotationManagedCIDRs = "dynamic-prefix.io/managed-cidrs"
	// AnnotationManagedAddresses is the record on MetalLB IPAddressPools.
	AnnotationManagedAddresses = "dynamic-prefix.io/managed-addresses"
)

// Finalizer is the existing operator's, on every DynamicPrefix it reconciled.
// renumber adds none; it removes this one once it has released what a
// DynamicPrefix being deleted had written.
const Finalizer = "dynamic-prefix.io/finalizer"

// OperatorManagedBy is the app.kubernetes.io/managed-by label of the objects
// the existing operator creates (Calico sibling IPPools, BGP advertisements).
const OperatorManagedBy = "dynamic-prefix-operator"

// DynamicPrefix is one prefix followed from the network.
type DynamicPrefix struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status,omitempty"`
}

type Spec struct {
	Acquisition   Acquisition    `json:"acquisition"`
	AddressRanges []AddressRange `json:"addressRanges,omitempty"`
	Subnets       []Subnet       `json:"subnets,omitempty"`
	Transition    *Transition    `json:"transition,omitempty"`
}

type Acquisition struct {
	RouterAdvertisement *RouterAdvertisement `json:"routerAdvertisement,omitempty"`
	DHCPv6PD            *DHCPv6PD            `json:"dhcpv6pd,omitempty"`
	PrefixFilter        *PrefixFilter        `json:"prefixFilter,omitempty"`
	// Quorum (renumber addition): nodes that must report a prefix as preferred.
	Quorum *int `json:"quorum,omitempty"`
}

type RouterAdvertisement struct {
	Interface string `json:"interface,omitempty"`
	Enabled   *bool  `json:"enabled,omitempty"`
	// TrustedRouters: agents believe only RAs from these link-local sources
	// (enforced by the agents; the digest carries no routers).
	TrustedRouters []string `json:"trustedRouters,omitempty"`
}

type DHCPv6PD struct {
	Interface             string `json:"interface"`
	RequestedPrefixLength *int   `json:"requestedPrefixLength,omitempty"`
	// Mode (renumber addition): "client" (default) runs the agents' own
	// DHCPv6 client on one node; "host" follows the delegation a DHCPv6
	// client on the nodes installs.
	Mode string `json:"mode,omitempty"`
	// NodeNames (renumber addition): the nodes that may run the client, in
	// order of preference (empty: any node whose agent follows the interface).
	NodeNames []string `json:"nodeNames,omitempty"`
}

// DHCPv6PD modes.
const (
	ModeClient = "client"
	ModeHost   = "host"
)

// DHCPv6PDStatus says which node's agent runs the DHCPv6 client.
type DHCPv6PDStatus struct {
	ClientNode string `json:"clientNode,omitempty"`
}

type PrefixFilter struct {
	RequireGlobalUnicast *bool `json:"requireGlobalUnicast,omitempty"`
	// AllowedPrefixes (renumber addition): only prefixes inside one are adopted.
	AllowedPrefixes []string `json:"allowedPrefixes,omitempty"`
	// MinPrefixLength / MaxPrefixLength bound the length of a plausible
	// delegation, for every source.
	MinPrefixLength *int `json:"minPrefixLength,omitempty"`
	MaxPrefixLength *int `json:"maxPrefixLength,omitempty"`
}

type AddressRange struct {
	Name  string `json:"name"`
	Start string `json:"start"`
	End   string `json:"end"`
}

type Subnet struct {
	Name         string `json:"name"`
	Offset       int64  `json:"offset,omitempty"`
	PrefixLength int    `json:"prefixLength"`
	BGP          *BGP   `json:"bgp,omitempty"`
}

type BGP struct {
	Advertise bool   `json:"advertise,omitempty"`
	Community string `json:"community,omitempty"`
}

type Transition struct {
	Mode             string `json:"mode,omitempty"`
	MaxPrefixHistory int    `json:"maxPrefixHistory,omitempty"`
}

type Status struct {
	CurrentPrefix      string               `json:"currentPrefix,omitempty"`
	PrefixSource       string               `json:"prefixSource,omitempty"`
	LeaseExpiresAt     *metav1.Time         `json:"leaseExpiresAt,omitempty"`
	ObservedGeneration int64                `json:"observedGeneration,omitempty"`
	AddressRanges      []AddressRangeStatus `json:"addressRanges,omitempty"`
	Subnets            []SubnetStatus       `json:"subnets,omitempty"`
	History            []HistoryEntry       `json:"history,omitempty"`
	DHCPv6PD           *DHCPv6PDStatus      `json:"dhcpv6pd,omitempty"`
	Conditions         []metav1.Condition   `json:"conditions,omitempty"`
}

type AddressRangeStatus struct {
	Name  string `json:"name"`
	Start string `json:"start"`
	End   string `json:"end"`
	CIDR  string `json:"cidr"`
}

type SubnetStatus struct {
	Name             string `json:"name"`
	CIDR             string `json:"cidr"`
	BGPAdvertisement string `json:"bgpAdvertisement,omitempty"`
}

// History states.
const (
	StateActive   = "active"
	StateDraining = "draining"
	StateExpired  = "expired"
)

type HistoryEntry struct {
	Prefix       string       `json:"prefix"`
	AcquiredAt   *metav1.Time `json:"acquiredAt,omitempty"`
	DeprecatedAt *metav1.Time `json:"deprecatedAt,omitempty"`
	// ExpiresAt (renumber addition): when a draining prefix leaves the pools,
	// computed once at the transition.
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	State     string       `json:"state"`
}

// FromUnstructured converts an object read with the dynamic client.
func FromUnstructured(u *unstructured.Unstructured) (*DynamicPrefix, error) {
	var dp DynamicPrefix
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &dp); err != nil {
		return nil, fmt.Errorf("dynamicprefix: decoding %q: %w", u.GetName(), err)
	}
	return &dp, nil
}
