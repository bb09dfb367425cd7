// The DynamicPrefix object and its status as the writer reads and writes them;
// the spec's types are shared with the agent (internal/dynamicprefix). They
// only describe the wire format: model.Parse reads a spec into the model
// every part of the writer reads, and the status's ranges, subnets and
// history states are model's.

package api

import (
	"fmt"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, version and resource served by manifests/crds/dynamicprefixes.yaml.
var GVR = schema.GroupVersionResource{Group: "dynamic-prefix.io", Version: "v1alpha1", Resource: "dynamicprefixes"}

// DynamicPrefix is one prefix followed from the network.
type DynamicPrefix struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              dynamicprefix.Spec `json:"spec"`
	Status            Status             `json:"status,omitempty"`
}

type Status struct {
	CurrentPrefix string `json:"currentPrefix,omitempty"`
	// DelegatedPrefix (renumber addition): the delegation the current prefix
	// is part of, with routerAdvertisement.delegatedPrefixLength.
	DelegatedPrefix    string                        `json:"delegatedPrefix,omitempty"`
	PrefixSource       string                        `json:"prefixSource,omitempty"`
	LeaseExpiresAt     *metav1.Time                  `json:"leaseExpiresAt,omitempty"`
	ObservedGeneration int64                         `json:"observedGeneration,omitempty"`
	AddressRanges      []model.AddressRangeStatus    `json:"addressRanges,omitempty"`
	Subnets            []model.SubnetStatus          `json:"subnets,omitempty"`
	History            []HistoryEntry                `json:"history,omitempty"`
	DHCPv6PD           *dynamicprefix.DHCPv6PDStatus `json:"dhcpv6pd,omitempty"`
	Conditions         []metav1.Condition            `json:"conditions,omitempty"`
}

type HistoryEntry struct {
	Prefix       string       `json:"prefix"`
	AcquiredAt   *metav1.Time `json:"acquiredAt,omitempty"`
	DeprecatedAt *metav1.Time `json:"deprecatedAt,omitempty"`
	// ExpiresAt (renumber addition): when a draining prefix leaves the pools,
	// computed once at the transition.
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	State     string       `json:"state"` // model.StateActive, StateDraining or StateExpired
	// DelegatedPrefix (renumber addition): the delegation Prefix is part of,
	// with routerAdvertisement.delegatedPrefixLength.
	DelegatedPrefix string `json:"delegatedPrefix,omitempty"`
}

// FromUnstructured converts an object read with the dynamic client.
func FromUnstructured(u *unstructured.Unstructured) (*DynamicPrefix, error) {
	var dp DynamicPrefix
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &dp); err != nil {
		return nil, fmt.Errorf("dynamicprefix: decoding %q: %w", u.GetName(), err)
	}
	return &dp, nil
}
